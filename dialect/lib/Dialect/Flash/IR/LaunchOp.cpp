// flash.launch: tensors bound to a flash.kernel's operands, plus the launch
// parameters that do not change its code.
#include "LaunchParameters.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/IR/LaunchSignature.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::flash {

static std::string roleList(llvm::ArrayRef<TensorRole> roles) {
  std::string s;
  for (TensorRole r : roles) s += (s.empty() ? "" : ", ") + std::string(roleName(r));
  return s;
}

// "1 operand", "3 operands"
static std::string count(size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// q, k, v, o, dO, dq, dk, dv: rank 4 of the kernel's dtype and head_dim; dq_accum
// the same in f32; lse and D: rank 3 f32.
static LogicalResult verifyRole(Operation* op, const char* what, unsigned index, TensorRole role, Type type,
                                const flashgen::KernelSpec& spec, Type kernelElement) {
  auto tensor = cast<RankedTensorType>(type);
  Type element = isFloat32Role(role) ? Float32Type::get(op->getContext()) : kernelElement;
  if (isRowRole(role)) {
    if (tensor.getRank() == 3 && tensor.getElementType() == element) return success();
    return op->emitOpError() << what << " #" << index << " (" << roleName(role)
                             << ") must be an f32 tensor (batch, heads_q, seqlen_q), got " << type;
  }
  if (tensor.getRank() == 4 && tensor.getElementType() == element && tensor.getDimSize(3) == spec.head_dim)
    return success();
  return op->emitOpError() << what << " #" << index << " (" << roleName(role) << ") must be a tensor of " << element
                           << " (batch, seqlen, heads, " << spec.head_dim << "), got " << type;
}

LogicalResult LaunchOp::verify() { return verifyLaunchParameters(*this, getWindow(), getSoftcap(), getSoftmaxScale()); }

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection& symbols) {
  auto kernel = symbols.lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel) return emitOpError() << "'" << getKernel() << "' does not name a flash.kernel";
  const flashgen::KernelSpec spec = kernel.getSpec();
  const LaunchSignature signature = launchSignature(spec);
  const char* pass = flashgen::to_string(spec.pass);

  if (getArgs().size() != signature.operands.size())
    return emitOpError() << "kernel @" << getKernel() << " (" << pass << ") takes "
                         << count(signature.operands.size(), "operand") << " (" << roleList(signature.operands)
                         << "), got " << getArgs().size();
  if (getNumResults() != signature.results.size())
    return emitOpError() << "kernel @" << getKernel() << " (" << pass << ") returns "
                         << count(signature.results.size(), "result") << " (" << roleList(signature.results)
                         << "), got " << getNumResults();
  for (auto [i, role, value] : llvm::enumerate(signature.operands, getArgs()))
    if (failed(verifyRole(*this, "operand", i, role, value.getType(), spec, kernel.getElementType()))) return failure();
  for (auto [i, role, value] : llvm::enumerate(signature.results, getResults()))
    if (failed(verifyRole(*this, "result", i, role, value.getType(), spec, kernel.getElementType()))) return failure();

  if (spec.window != getWindow().has_value())
    return emitOpError() << "kernel @" << getKernel() << (spec.window ? " has" : " has no")
                         << " `window`: the launch must " << (spec.window ? "" : "not ")
                         << "give window = [left, right]";
  if (spec.softcap != getSoftcap().has_value())
    return emitOpError() << "kernel @" << getKernel() << (spec.softcap ? " has" : " has no")
                         << " `softcap`: the launch must " << (spec.softcap ? "" : "not ") << "give softcap = <cap>";
  return success();
}

}  // namespace mlir::flash
