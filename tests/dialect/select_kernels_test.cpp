// One selection for every front end: with an autotune winner persisted (TuningDb::store),
// the runtime's KernelSelector, the MLIR pass --flash-select-kernels and
// `flashgen dump --pass all` pick the same kernels, and not the heuristic table's.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "compiler/mlir_text.h"
#include "compiler/tuning_candidates.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "runtime/autotune_selection.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cache/cache_test_support.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::ScratchDir;

// A forward and a backward problem: d128 bf16 causal, 4k tokens, 8 heads.
constexpr const char* kProblems = R"(
func.func @step(%q: tensor<2x4096x8x128xbf16>, %do: tensor<2x4096x8x128xbf16>)
    -> (tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>) {
  %o, %lse = flash.attention %q, %q, %q causal
      : (tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>)
      -> (tensor<2x4096x8x128xbf16>, tensor<2x8x4096xf32>)
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %o, %lse, %do causal
      : (tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>,
         tensor<2x4096x8x128xbf16>, tensor<2x8x4096xf32>, tensor<2x4096x8x128xbf16>)
      -> (tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>)
  return %dq, %dk, %dv : tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>, tensor<2x4096x8x128xbf16>
}
)";

ProblemKey problem() {
  ProblemKey p;
  p.head_dim = 128;
  p.causal = true;
  p.batch = 2;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 4096;
  return p;
}

// A GPU as `flashgen tune` would record it on this build (same flashgen and NVRTC).
DeviceProfile gpu(const std::string& name) {
  DeviceProfile d;
  d.identity.gpu_name = name;
  d.identity.sm_count = 132;
  d.identity.driver_version = 13000;
  d.identity.nvrtc_version = nvrtc_version();
  d.arch = Arch::sm_90a;
  d.limits.max_shared_memory = max_shared_memory(Arch::sm_90a);
  return d;
}

// Persists, for the problem's forward and backward keys on `device`, candidate `which` of
// each set (not the heuristic default); returns {forward winner, backward winner}.
std::pair<Candidate, Candidate> persist_winners(const std::filesystem::path& dir, const DeviceProfile& device,
                                                size_t which) {
  std::vector<std::pair<TuningKey, TunedEntry>> entries;
  for (TunedPass pass : {TunedPass::forward, TunedPass::backward}) {
    const TuningKey key = tuning_key(problem(), pass, device.arch);
    const CandidateSet set = tuning_candidates(key, device.limits);
    EXPECT_GT(set.candidates.size(), which) << key.name();
    TunedEntry e;
    e.candidate_set = set.hash;
    e.kernels = set.candidates.at(which);
    e.candidates = static_cast<int>(set.candidates.size());
    entries.emplace_back(key, e);
  }
  TuningDb(dir, nullptr).store(device, entries);
  return {entries[0].second.kernels, entries[1].second.kernels};
}

class SelectionAgreement : public ::testing::Test {
 protected:
  SelectionAgreement() { context_.loadDialect<mlir::flash::FlashDialect, mlir::func::FuncDialect>(); }

  // The specs of the flash.kernel ops --flash-select-kernels declares, in order; the
  // pass's error in `error` when it fails.
  std::vector<KernelSpec> run_pass(const mlir::flash::FlashSelectKernelsOptions& options,
                                   std::string* error = nullptr) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(kProblems, &context_);
    EXPECT_TRUE(module);
    std::string diagnostics;
    mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    mlir::PassManager pm(&context_);
    pm.addPass(mlir::flash::createFlashSelectKernels(options));
    const bool ok = mlir::succeeded(pm.run(*module));
    if (error) *error = diagnostics;
    EXPECT_EQ(ok, error == nullptr) << diagnostics;
    std::vector<KernelSpec> specs;
    if (ok)
      for (auto kernel : module->getOps<mlir::flash::KernelOp>()) specs.push_back(kernel.getSpec());
    return specs;
  }

  static mlir::flash::FlashSelectKernelsOptions options(const std::filesystem::path& dir, const std::string& device) {
    mlir::flash::FlashSelectKernelsOptions o;
    o.arch = "sm_90a";
    o.tuningDir = dir.string();
    o.device = device;
    return o;
  }

  mlir::MLIRContext context_;
};

Candidate joined(const Candidate& a, const Candidate& b) {
  Candidate out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST_F(SelectionAgreement, RuntimePassAndDumpPickThePersistedWinner) {
  ScratchDir dir;
  const DeviceProfile device = gpu("Test GPU");
  const auto [forward, backward] = persist_winners(dir.path(), device, 1);

  KernelSelector runtime(AutotunePolicy::cached, dir.path(), nullptr);
  EXPECT_EQ(runtime.select(problem(), TunedPass::forward, device, 0), forward);
  EXPECT_EQ(runtime.select(problem(), TunedPass::backward, device, 0), backward);
  const Candidate heuristic =
      joined(select_forward_kernels(problem(), Arch::sm_90a), select_backward_kernels(problem(), Arch::sm_90a));
  ASSERT_NE(joined(forward, backward), heuristic);

  // The pass, by the sole device of the file and by its GPU name.
  EXPECT_EQ(run_pass(options(dir.path(), "")), joined(forward, backward));
  EXPECT_EQ(run_pass(options(dir.path(), "Test GPU")), joined(forward, backward));
  // Without a tuning directory: the heuristic table, as the runtime with autotune off.
  EXPECT_EQ(run_pass(options({}, "")), heuristic);

  // `flashgen dump --pass all` with the same directory.
  const std::string command =
      fmt::format("'{}' dump --pass all --head-dim 128 --causal --seqlen 4096 --arch sm_90a --emit mlir "
                  "--tuning-dir '{}' 2>&1",
                  FLASHGEN_CLI, dir.path().string());
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    EXPECT_EQ(::pclose(pipe), 0) << out;
  }
  EXPECT_EQ(out, mlir_module(joined(forward, backward)));
}

TEST_F(SelectionAgreement, SeveralDevicesNeedTheDeviceOption) {
  ScratchDir dir;
  const auto a = persist_winners(dir.path(), gpu("GPU A"), 1);
  const auto b = persist_winners(dir.path(), gpu("GPU B"), 2);
  std::string error;
  run_pass(options(dir.path(), ""), &error);
  EXPECT_THAT(error, HasSubstr("--flash-select-kernels: device: "));
  EXPECT_THAT(error, HasSubstr("from 2 devices"));
  EXPECT_EQ(run_pass(options(dir.path(), "GPU B")), joined(b.first, b.second));
  EXPECT_EQ(run_pass(options(dir.path(), gpu("GPU A").identity.key())), joined(a.first, a.second));

  run_pass(options(dir.path(), "GPU Z"), &error);
  EXPECT_THAT(error, HasSubstr("'GPU Z' names no device"));
  run_pass(options(dir.path() / "missing", ""), &error);
  EXPECT_THAT(error, HasSubstr("--flash-select-kernels: tuning-dir: "));
  EXPECT_THAT(error, HasSubstr("holds no autotune.json"));
}

}  // namespace
}  // namespace flashgen
