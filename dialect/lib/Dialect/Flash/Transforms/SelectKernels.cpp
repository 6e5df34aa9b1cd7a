// --flash-select-kernels: flash.attention / flash.attention_grad -> flash.kernel
// symbols + flash.launch chains, with the runtime's selection (TunedSelection:
// persisted autotune winners, else the heuristic table).
#include <array>

#include "compiler/spec_fields.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/IR/LaunchSignature.h"
#include "flashgen/Dialect/Flash/Transforms/Passes.h"
#include "runtime/autotune_selection.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::flash {

#define GEN_PASS_DEF_FLASHSELECTKERNELS
#include "flashgen/Dialect/Flash/Transforms/Passes.h.inc"

namespace {

constexpr size_t kRoleCount = static_cast<size_t>(TensorRole::grad_query_accum) + 1;

// The tensors of one problem by role: known values, and the types of those a
// launch will produce.
struct RoleTable {
  std::array<Value, kRoleCount> values;
  std::array<Type, kRoleCount> types;
  Value& value(TensorRole r) { return values[static_cast<size_t>(r)]; }
  Type& type(TensorRole r) { return types[static_cast<size_t>(r)]; }
};

RankedTensorType ranked(Value v) { return cast<RankedTensorType>(v.getType()); }

// Dynamic sizes are unknown to selection: 0.
long long staticOrZero(int64_t d) { return ShapedType::isDynamic(d) ? 0 : d; }

template <typename ProblemOp>
flashgen::ProblemKey problemKey(ProblemOp op) {
  const RankedTensorType q = ranked(op.getQuery()), k = ranked(op.getKey());
  flashgen::ProblemKey key;
  key.head_dim = static_cast<int>(q.getDimSize(3));
  key.dtype = toDType(q.getElementType());
  // The problem ops carry each flag of the spec under its name (a window or a cap
  // with its launch value): present means on.
  flashgen::for_each_problem_field([&](const auto& f) {
    if constexpr (std::is_same_v<typename std::decay_t<decltype(f)>::value_type, bool>)
      key.*f.member = op->hasAttr(f.name);
  });
  key.batch = staticOrZero(q.getDimSize(0));
  key.heads_q = staticOrZero(q.getDimSize(2));
  key.heads_kv = staticOrZero(k.getDimSize(2));
  key.seqlen_q = staticOrZero(q.getDimSize(1));
  key.seqlen_k = staticOrZero(k.getDimSize(1));
  return key;
}

// One run of the pass over a module: declares kernels after one another at the
// top of the module and replaces each problem op by its launches.
class ProblemLowering {
 public:
  ProblemLowering(ModuleOp module, flashgen::Arch arch, const flashgen::TunedSelection& selection)
      : arch_(arch), selection_(selection), symbols_(module), nextKernel_(module.getBody()->begin()) {}

  LogicalResult lower(AttentionOp op) {
    RoleTable table;
    table.value(TensorRole::query) = op.getQuery();
    table.value(TensorRole::key) = op.getKey();
    table.value(TensorRole::value) = op.getValue();
    table.type(TensorRole::out) = op.getOut().getType();
    table.type(TensorRole::lse) = op.getLse().getType();
    const flashgen::ProblemKey key = problemKey(op);
    return lowerWith(op, flashgen::TunedPass::forward, key, table, {TensorRole::out, TensorRole::lse});
  }

  LogicalResult lower(AttentionGradOp op) {
    RoleTable table;
    table.value(TensorRole::query) = op.getQuery();
    table.value(TensorRole::key) = op.getKey();
    table.value(TensorRole::value) = op.getValue();
    table.value(TensorRole::out) = op.getOut();
    table.value(TensorRole::lse) = op.getLse();
    table.value(TensorRole::grad_out) = op.getGradOut();
    table.type(TensorRole::grad_query) = op.getGradQuery().getType();
    table.type(TensorRole::grad_key) = op.getGradKey().getType();
    table.type(TensorRole::grad_value) = op.getGradValue().getType();
    // D is one f32 per query row, like lse; the dq accumulator is q in f32.
    table.type(TensorRole::delta) = op.getLse().getType();
    table.type(TensorRole::grad_query_accum) = ranked(op.getQuery()).clone(Float32Type::get(op.getContext()));
    const flashgen::ProblemKey key = problemKey(op);
    return lowerWith(op, flashgen::TunedPass::backward, key, table,
                     {TensorRole::grad_query, TensorRole::grad_key, TensorRole::grad_value});
  }

 private:
  // Launches the selected kernels in order, each taking its operands from the table
  // and adding its results to it; then replaces op's results by the table's `outputs`.
  template <typename ProblemOp>
  LogicalResult lowerWith(ProblemOp op, flashgen::TunedPass pass, const flashgen::ProblemKey& key, RoleTable& table,
                          ArrayRef<TensorRole> outputs) {
    std::vector<flashgen::KernelSpec> specs;
    try {
      specs = selection_.select(key, pass);
    } catch (const flashgen::Error& e) {
      return op.emitOpError() << "no kernel for " << flashgen::describe(key) << " on " << flashgen::to_string(arch_)
                              << ": "
                              << e.what();
    }
    if (specs.empty())
      return op.emitOpError() << "no kernel for " << flashgen::describe(key) << " on " << flashgen::to_string(arch_)
                              << ": flashgen's kernel selection returned none";
    OpBuilder builder(op);
    for (const flashgen::KernelSpec& spec : specs) {
      FailureOr<KernelOp> kernel = declare(op, spec);
      if (failed(kernel)) return failure();
      const LaunchSignature signature = launchSignature(spec);
      SmallVector<Value> operands;
      for (TensorRole role : signature.operands) {
        if (!table.value(role))
          return op.emitOpError() << "kernel " << spec.uri() << " needs " << roleName(role)
                                  << ", which no earlier kernel of the selection produces";
        operands.push_back(table.value(role));
      }
      SmallVector<Type> resultTypes;
      for (TensorRole role : signature.results) {
        if (!table.type(role))
          return op.emitOpError() << "kernel " << spec.uri() << " produces " << roleName(role)
                                  << ", which this problem has no use for";
        resultTypes.push_back(table.type(role));
      }
      auto launch = builder.create<LaunchOp>(op.getLoc(), resultTypes, kernel->getSymName(), operands,
                                             spec.window ? op.getWindowAttr() : nullptr,
                                             spec.softcap ? op.getSoftcapAttr() : nullptr, op.getSoftmaxScaleAttr());
      for (auto [role, result] : llvm::zip(signature.results, launch.getResults())) table.value(role) = result;
    }
    SmallVector<Value> replacements;
    for (TensorRole role : outputs) {
      if (!table.value(role))
        return op.emitOpError() << "the kernels selected for " << flashgen::describe(key) << " never produce "
                                << roleName(role);
      replacements.push_back(table.value(role));
    }
    op->replaceAllUsesWith(replacements);
    op.erase();
    return success();
  }

  // The module's flash.kernel for `spec`, named by its URI, declared on first use
  // after the kernels this pass declared before.
  FailureOr<KernelOp> declare(Operation* user, const flashgen::KernelSpec& spec) {
    const std::string name = spec.uri();
    if (Operation* existing = symbols_.lookup(name)) {
      auto kernel = dyn_cast<KernelOp>(existing);
      if (kernel && kernel.getSpec() == spec) return kernel;
      return user->emitOpError() << "symbol @" << name << " exists but is not the kernel of that name";
    }
    OpBuilder builder(user->getContext());
    auto kernel = builder.create<KernelOp>(user->getLoc(), name, spec);
    symbols_.insert(kernel, nextKernel_);
    nextKernel_ = std::next(Block::iterator(kernel));
    return kernel;
  }

  flashgen::Arch arch_;
  const flashgen::TunedSelection& selection_;
  SymbolTable symbols_;
  Block::iterator nextKernel_;
};

class SelectKernels : public impl::FlashSelectKernelsBase<SelectKernels> {
 public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<flashgen::Arch> target = flashgen::parse_arch(arch);
    if (!target) {
      module.emitError() << "--flash-select-kernels: arch '" << arch
                         << "' is not one of sm_80, sm_86, sm_89, sm_90, sm_90a";
      return signalPassFailure();
    }
    std::optional<flashgen::TunedSelection> selection;
    try {
      flashgen::TunedSelection::Options o;
      o.dir = tuningDir.getValue();
      o.device = device;
      o.arch = *target;
      o.dir_option = "--flash-select-kernels: tuning-dir";
      o.device_option = "--flash-select-kernels: device";
      o.log = [&](flashgen::LogLevel level, const std::string& message) {
        if (level >= flashgen::LogLevel::warning) emitWarning(module.getLoc()) << message;
      };
      selection.emplace(std::move(o));
    } catch (const flashgen::Error& e) {
      emitError(module.getLoc()) << e.what();  // an option's problem: no op to show
      return signalPassFailure();
    }
    SmallVector<Operation*> problems;
    module.walk([&](Operation* op) {
      if (isa<AttentionOp, AttentionGradOp>(op)) problems.push_back(op);
    });
    ProblemLowering lowering(module, *target, *selection);
    for (Operation* op : problems) {
      LogicalResult lowered =
          isa<AttentionOp>(op) ? lowering.lower(cast<AttentionOp>(op)) : lowering.lower(cast<AttentionGradOp>(op));
      if (failed(lowered)) return signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace mlir::flash
