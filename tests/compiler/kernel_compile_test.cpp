// A representative subset of the kernel matrix, compiled with NVRTC (no GPU needed):
// each selected kernel must compile for its arch with zero spills.
#include <gtest/gtest.h>

#include "compile_check.h"

#include "compiler/kernel_pieces.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen::test {
namespace {

class KernelCompile : public ::testing::TestWithParam<CompileCase> {};

TEST_P(KernelCompile, SelectedKernelsCompileWithoutSpills) { expect_compiles_without_spills(GetParam()); }

const CompileCase kSubset[] = {
    {64, DType::bf16, false, false, false, Arch::sm_90a},  {128, DType::bf16, true, false, false, Arch::sm_90a},
    {128, DType::f16, false, false, false, Arch::sm_80},   {59, DType::f16, true, true, true, Arch::sm_80},
    {256, DType::bf16, true, false, false, Arch::sm_90},   {96, DType::bf16, false, true, true, Arch::sm_90a},
    // Softcap on the unmasked forwards that are persistent without it (d64 on three warpgroups, d256).
    {64, DType::bf16, false, false, true, Arch::sm_90a},   {256, DType::bf16, false, false, true, Arch::sm_90a},
};

INSTANTIATE_TEST_SUITE_P(Subset, KernelCompile, ::testing::ValuesIn(kSubset),
                         [](const ::testing::TestParamInfo<CompileCase>& i) { return compile_case_name(i.param); });

// The warp-specialised dK/dV kernel compiles with zero spills at d64..d128 on 64-query tiles,
// masked or not, deterministic or not, fp16 and bf16; and on the 128-query tiles the selection
// gives d64, masked or not, packed sequences included (those within their producer-warp
// allowance, compile_check.cpp); on the tuner's 80-query tiles at d128 (dQ^T by head-dim
// columns), masked or not, deterministic or not, and packed unmasked; at d256 on the shared-scores
// split (64 keys, a head-dim half per warpgroup), masked or not, packed or not; with softcap
// (the slope beside S^T and dP^T) on 64-query tiles at d64..d128, masked or not.
TEST(KernelCompile, WarpSpecialisedDkdvCompilesWithoutSpills) {
  auto check = [](int head_dim, int block_m, bool causal, bool window, bool varlen, bool deterministic,
                  bool softcap = false) {
    const bool d256 = head_dim > 128;
    KernelSpec s;
    s.pass = Pass::bwd_dkdv;
    s.head_dim = head_dim;
    s.dtype = head_dim == 96 ? DType::f16 : DType::bf16;
    s.causal = causal;
    s.window = window;
    s.varlen = varlen;
    s.deterministic = deterministic;
    s.softcap = softcap;
    s.block_m = block_m;
    s.block_n = d256 ? 64 : 128;
    s.warps = 12;
    s.arch = Arch::sm_90a;
    ASSERT_TRUE(s.warp_specialized()) << s.uri();
    ASSERT_TRUE(s.problems().empty()) << s.uri();
    EXPECT_EQ(dkdv_mainloop(s), d256 ? DkdvMainloop::sm90_ws_shared_scores : DkdvMainloop::sm90_ws) << s.uri();
    const CompiledKernel k = compile_kernel(s);
    EXPECT_LE(k.resources.spill_stores, allowed_spill_bytes(s)) << s.uri();
    EXPECT_LE(k.resources.spill_loads, allowed_spill_bytes(s)) << s.uri();
  };
  for (int head_dim : {64, 96, 128})
    for (bool causal : {false, true})
      for (bool deterministic : {false, true}) check(head_dim, 64, causal, false, false, deterministic);
  for (int mask = 0; mask < 3; ++mask)  // none, causal, window
    for (bool varlen : {false, true})
      for (bool deterministic : {false, true}) check(64, 128, mask == 1, mask == 2, varlen, deterministic);
  for (int mask = 0; mask < 3; ++mask)  // d128's 80-query tiles (packed: unmasked, not deterministic)
    for (bool deterministic : {false, true}) check(128, 80, mask == 1, mask == 2, false, deterministic);
  check(128, 80, false, false, true, false);
  for (int mask = 0; mask < 3; ++mask)  // d256: both warpgroups on the same 64 keys
    for (bool varlen : {false, true}) check(256, 64, mask == 1, mask == 2, varlen, mask == 1 && !varlen);
  for (int head_dim : {64, 96, 128})  // softcap: 64-query tiles
    for (int mask = 0; mask < 3; ++mask) check(head_dim, 64, mask == 1, mask == 2, mask == 1, mask == 0, true);
}

// The persistent forward under a mask (the longest-first snake, scheduler/persistent.cuh; a
// tuning candidate beside the single-tile form) compiles with zero spills on the heuristic's
// tiles up to d128: d64 on 192 x 128 and 128 x 128, d96 and d128 on 128 x 128 and d128 on
// 128 x 176 (O over the V ring), causal or windowed, packed or not, with softcap, fp16 once.
// At d256 the spec refuses it (its consumers spill).
KernelSpec persistent_masked_forward(int head_dim, int block_m, int block_n, bool causal, bool varlen, bool softcap,
                                     DType dtype) {
  KernelSpec s;
  s.pass = Pass::fwd;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.causal = causal;
  s.window = !causal;
  s.varlen = varlen;
  s.softcap = softcap;
  s.block_m = block_m;
  s.block_n = block_n;
  s.warps = 4 * (block_m / 64 + 1);
  s.stages = 2;
  s.persistent = true;
  s.arch = Arch::sm_90a;
  return s;
}

TEST(KernelCompile, PersistentMaskedForwardCompilesWithoutSpills) {
  auto check = [](int head_dim, int block_m, int block_n, bool causal, bool varlen, bool softcap, DType dtype) {
    const KernelSpec s = persistent_masked_forward(head_dim, block_m, block_n, causal, varlen, softcap, dtype);
    ASSERT_TRUE(s.warp_specialized()) << s.uri();
    ASSERT_TRUE(s.problems().empty()) << s.uri();
    const CompiledKernel k = compile_kernel(s);
    EXPECT_EQ(k.resources.spill_stores, 0) << s.uri();
    EXPECT_EQ(k.resources.spill_loads, 0) << s.uri();
  };
  for (bool causal : {true, false}) {
    check(64, 192, 128, causal, false, false, DType::bf16);
    check(128, 128, 128, causal, false, false, DType::bf16);
  }
  check(64, 128, 128, true, true, false, DType::f16);
  check(96, 128, 128, true, false, true, DType::bf16);
  check(128, 128, 176, true, false, false, DType::bf16);
  check(128, 128, 128, true, true, true, DType::bf16);
  const std::vector<std::string> problems =
      persistent_masked_forward(256, 128, 80, true, false, false, DType::bf16).problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("expected unmasked tiles above 128"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace flashgen::test
