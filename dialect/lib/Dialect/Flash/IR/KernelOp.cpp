// flash.kernel: a symbol whose attributes are exactly a flashgen KernelSpec.
#include "compiler/mlir_text.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace mlir::flash {

// The ODS enums (FlashOps.td) carry the KernelSpec enums' values, so converting is a cast.
template <typename A, typename B>
constexpr bool same(A a, B b) {
  return static_cast<int>(a) == static_cast<int>(b);
}
static_assert(same(KernelPass::fwd, flashgen::Pass::fwd) &&
              same(KernelPass::bwd_preprocess, flashgen::Pass::bwd_preprocess) &&
              same(KernelPass::bwd_dkdv, flashgen::Pass::bwd_dkdv) &&
              same(KernelPass::bwd_dq, flashgen::Pass::bwd_dq) &&
              same(KernelPass::bwd_dq_convert, flashgen::Pass::bwd_dq_convert));
static_assert(same(Arch::sm_80, flashgen::Arch::sm_80) && same(Arch::sm_86, flashgen::Arch::sm_86) &&
              same(Arch::sm_89, flashgen::Arch::sm_89) && same(Arch::sm_90, flashgen::Arch::sm_90) &&
              same(Arch::sm_90a, flashgen::Arch::sm_90a));

flashgen::DType toDType(Type t) {
  if (t.isF16()) return flashgen::DType::f16;
  if (t.isBF16()) return flashgen::DType::bf16;
  return flashgen::DType::f32;
}

static Type toType(Builder& b, flashgen::DType t) {
  switch (t) {
    case flashgen::DType::f16: return b.getF16Type();
    case flashgen::DType::bf16: return b.getBF16Type();
    case flashgen::DType::f32: return b.getF32Type();
  }
  return b.getF32Type();
}

flashgen::KernelSpec KernelOp::getSpec() {
  flashgen::KernelSpec s;
  s.pass = static_cast<flashgen::Pass>(getPass());
  s.arch = static_cast<flashgen::Arch>(getArch());
  s.head_dim = static_cast<int>(getHeadDimAttr().getInt());
  s.dtype = toDType(getDtype());
  s.block_m = static_cast<int>(getBlockMAttr().getInt());
  s.block_n = static_cast<int>(getBlockNAttr().getInt());
  s.warps = static_cast<int>(getWarpsAttr().getInt());
  s.stages = static_cast<int>(getStagesAttr().getInt());
  s.causal = getCausal();
  s.window = getWindow();
  s.softcap = getSoftcap();
  s.deterministic = getDeterministic();
  return s;
}

void KernelOp::build(OpBuilder& b, OperationState& state, StringRef name, const flashgen::KernelSpec& spec) {
  auto flag = [&](bool on) { return on ? b.getUnitAttr() : UnitAttr(); };
  MLIRContext* ctx = b.getContext();
  build(b, state, b.getStringAttr(name), KernelPassAttr::get(ctx, static_cast<KernelPass>(spec.pass)),
        ArchAttr::get(ctx, static_cast<Arch>(spec.arch)), b.getI32IntegerAttr(spec.head_dim),
        TypeAttr::get(toType(b, spec.dtype)), b.getI32IntegerAttr(spec.block_m), b.getI32IntegerAttr(spec.block_n),
        b.getI32IntegerAttr(spec.warps), b.getI32IntegerAttr(spec.stages), flag(spec.causal), flag(spec.window),
        flag(spec.softcap), flag(spec.deterministic));
}

// One text for every printer of a kernel: compiler/mlir_text.cpp.
void KernelOp::print(OpAsmPrinter& p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << ' ' << flashgen::mlir_kernel_body(getSpec());
}

// @name <pass> for <arch> {head_dim = 128, dtype = bf16, block_m = .., block_n = .., warps = .., stages = ..,
//                          causal, window, softcap, deterministic}   (flags optional, keys in any order)
ParseResult KernelOp::parse(OpAsmParser& parser, OperationState& result) {
  Builder& b = parser.getBuilder();
  MLIRContext* ctx = b.getContext();
  const OperationName& op = result.name;

  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(op), result.attributes)) return failure();

  SMLoc at = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word)) return failure();
  std::optional<flashgen::Pass> pass = flashgen::parse_pass(word);
  if (!pass)
    return parser.emitError(at) << "unknown kernel pass '" << word
                                << "', expected fwd, bwd_preprocess, bwd_dkdv, bwd_dq or bwd_dq_convert";
  result.addAttribute(getPassAttrName(op), KernelPassAttr::get(ctx, static_cast<KernelPass>(*pass)));

  if (parser.parseKeyword("for")) return failure();
  at = parser.getCurrentLocation();
  if (parser.parseKeyword(&word)) return failure();
  std::optional<flashgen::Arch> arch = flashgen::parse_arch(word);
  if (!arch)
    return parser.emitError(at) << "unknown arch '" << word << "', expected sm_80, sm_86, sm_89, sm_90 or sm_90a";
  result.addAttribute(getArchAttrName(op), ArchAttr::get(ctx, static_cast<Arch>(*arch)));

  const StringRef integers[] = {"head_dim", "block_m", "block_n", "warps", "stages"};
  const StringRef flags[] = {"causal", "window", "softcap", "deterministic"};
  llvm::StringSet<> seen;
  auto parseEntry = [&]() -> ParseResult {
    SMLoc keyAt = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key)) return failure();
    if (!seen.insert(key).second) return parser.emitError(keyAt) << "'" << key << "' is given twice";
    if (llvm::is_contained(flags, key)) {
      result.addAttribute(key, b.getUnitAttr());
      return success();
    }
    const bool isInteger = llvm::is_contained(integers, key);
    if (!isInteger && key != "dtype")
      return parser.emitError(keyAt) << "unknown kernel attribute '" << key
                                     << "', expected head_dim, dtype, block_m, block_n, warps, stages, causal, "
                                        "window, softcap or deterministic";
    if (parser.parseEqual()) return failure();
    if (!isInteger) {
      Type dtype;
      if (parser.parseType(dtype)) return failure();
      result.addAttribute(key, TypeAttr::get(dtype));
      return success();
    }
    int32_t value = 0;
    if (parser.parseInteger(value)) return failure();
    result.addAttribute(key, b.getI32IntegerAttr(value));
    return success();
  };
  at = parser.getCurrentLocation();
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseEntry)) return failure();
  for (StringRef key : {"head_dim", "dtype", "block_m", "block_n", "warps", "stages"})
    if (!seen.contains(key)) return parser.emitError(at) << "kernel attribute '" << key << "' is missing";
  return success();
}

// The rules are KernelSpec's (compiler/kernel_spec.cpp): the runtime, `flashgen dump`
// and this verifier accept exactly the same kernels.
LogicalResult KernelOp::verify() {
  const std::vector<std::string> problems = getSpec().problems();
  for (const std::string& problem : problems) emitOpError() << problem;
  return success(problems.empty());
}

}  // namespace mlir::flash
