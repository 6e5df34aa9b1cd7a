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
};

INSTANTIATE_TEST_SUITE_P(Subset, KernelCompile, ::testing::ValuesIn(kSubset),
                         [](const ::testing::TestParamInfo<CompileCase>& i) { return compile_case_name(i.param); });

// The warp-specialised dK/dV kernel compiles with zero spills at d64..d128 on 64-query tiles,
// masked or not, deterministic or not, fp16 and bf16; and on the 128-query tiles the selection
// gives d64, masked or not, packed sequences included (those within their producer-warp
// allowance, compile_check.cpp); on the tuner's 80-query tiles at d128 (dQ^T by head-dim
// columns), masked or not, deterministic or not, and packed unmasked; at d256 on the shared-scores
// split (64 keys, a head-dim half per warpgroup), masked or not, packed or not.
TEST(KernelCompile, WarpSpecialisedDkdvCompilesWithoutSpills) {
  auto check = [](int head_dim, int block_m, bool causal, bool window, bool varlen, bool deterministic) {
    const bool d256 = head_dim > 128;
    KernelSpec s;
    s.pass = Pass::bwd_dkdv;
    s.head_dim = head_dim;
    s.dtype = head_dim == 96 ? DType::f16 : DType::bf16;
    s.causal = causal;
    s.window = window;
    s.varlen = varlen;
    s.deterministic = deterministic;
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
}

}  // namespace
}  // namespace flashgen::test
