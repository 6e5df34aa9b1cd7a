// The persistent forward's launch (runtime/launch_plan.cpp, plan_forward): the selection picks
// it for unmasked sm_90a tiles at d64/d128, and its plan launches min(tiles, SMs) CTAs in one
// dimension (scheduler/persistent.cuh walks the tiles); masked tiles keep one CTA per tile.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "compiler/kernel_selection.h"
#include "runtime/launch_plan.h"

namespace flashgen {
namespace {

Problem prefill(long long batch, long long seqlen, long long heads, long long head_dim, bool causal) {
  Problem p;
  p.batch = batch, p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = p.heads_kv = heads, p.head_dim = head_dim, p.dtype = DType::bf16, p.device = 0;
  p.options.softmax_scale = 0.088f;
  p.options.causal = causal;
  if (causal) p.options.window_right = 0;
  return p;
}

std::array<unsigned, 3> grid(const Problem& p, int sm_count) {
  const std::vector<KernelSpec> specs = select_forward_kernels(problem_key(p), Arch::sm_90a);
  return plan_forward(ForwardArgs{}, p, specs, 1, nullptr, sm_count).at(0).grid;
}

TEST(PersistentPlan, UnmaskedTilesRunOnAtMostOneCtaPerSm) {
  const Problem d128 = prefill(4, 4096, 16, 128, false);  // 32 x 16 x 4 = 2048 tiles of 128 rows
  ASSERT_TRUE(select_forward_kernels(problem_key(d128), Arch::sm_90a).at(0).persistent);
  EXPECT_EQ(grid(d128, 132), (std::array<unsigned, 3>{132, 1, 1}));
  EXPECT_EQ(grid(d128, 0), (std::array<unsigned, 3>{2048, 1, 1}));  // no SM count: a CTA per tile
  const Problem small = prefill(1, 300, 2, 64, false);  // 192-row tiles: 2 x 2 x 1
  EXPECT_EQ(grid(small, 132), (std::array<unsigned, 3>{4, 1, 1}));
  const Problem empty = prefill(0, 300, 2, 64, false);
  EXPECT_EQ(grid(empty, 132)[0], 0u);  // nothing to launch
}

TEST(PersistentPlan, MaskedAndWideTilesKeepOneCtaPerTile) {
  const Problem causal = prefill(4, 4096, 16, 128, true);
  EXPECT_FALSE(select_forward_kernels(problem_key(causal), Arch::sm_90a).at(0).persistent);
  EXPECT_EQ(grid(causal, 132), (std::array<unsigned, 3>{32, 16, 4}));
  const Problem d256 = prefill(2, 2048, 8, 256, false);  // its O tile does not fit beside the ring
  EXPECT_FALSE(select_forward_kernels(problem_key(d256), Arch::sm_90a).at(0).persistent);
  KernelSpec s = select_forward_kernels(problem_key(d256), Arch::sm_90a).at(0);
  s.persistent = true;
  EXPECT_FALSE(s.problems().empty());
}

}  // namespace
}  // namespace flashgen
