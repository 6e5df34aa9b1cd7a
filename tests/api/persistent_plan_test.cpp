// The persistent forward's launch (runtime/launch_plan.cpp, plan_forward): the selection picks
// it for unmasked sm_90a tiles at d64..d128 and d256, and its plan launches min(tiles, SMs) CTAs in one
// dimension (scheduler/persistent.cuh walks the tiles); masked tiles keep one CTA per tile
// unless a tuned spec asks for the persistent form (the longest-first snake), planned alike.
#include <gtest/gtest.h>

#include <array>
#include <string>
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

// O's staging: a tile of its own where it fits beside Q and the K/V rings (d128 at 128 x 128,
// the 1k bucket), over the V ring where it does not (d128's 128 x 176 from 4k, d256).
TEST(PersistentPlan, OIsStagedApartWhereItFitsElseOverTheVRing) {
  const KernelSpec short_rows = select_forward_kernels(problem_key(prefill(16, 1024, 16, 128, false)), Arch::sm_90a).at(0);
  EXPECT_TRUE(short_rows.persistent);
  EXPECT_EQ(short_rows.block_n, 128);
  EXPECT_FALSE(short_rows.o_staged_over_v());
  for (const Problem& p : {prefill(4, 4096, 16, 128, false), prefill(1, 16384, 8, 256, false)}) {
    const KernelSpec s = select_forward_kernels(problem_key(p), Arch::sm_90a).at(0);
    EXPECT_TRUE(s.persistent) << s.uri();
    EXPECT_TRUE(s.o_staged_over_v()) << s.uri();
    EXPECT_EQ(s.block_n, p.head_dim == 128 ? 176 : 80) << s.uri();
    EXPECT_LE(s.shared_memory_bytes(), max_shared_memory(Arch::sm_90a)) << s.uri();
    // Apart, O's tile (bf16, block_m x head_dim) and Q's `empty` would replace the two `empty` barriers.
    EXPECT_GT(s.shared_memory_bytes() - 16 + 8 + s.block_m * p.head_dim * 2, max_shared_memory(Arch::sm_90a)) << s.uri();
  }
  KernelSpec single = select_forward_kernels(problem_key(prefill(4, 4096, 16, 128, true)), Arch::sm_90a).at(0);
  EXPECT_FALSE(single.persistent);  // causal: one tile per CTA, O staged in Q's tile
  EXPECT_FALSE(single.o_staged_over_v());
}

TEST(PersistentPlan, MaskedPersistentSpecsAreLaunchedLikeUnmaskedOnes) {
  const Problem causal = prefill(1, 16384, 16, 128, true);  // 128 x 16 tiles of 128 rows
  std::vector<KernelSpec> specs = select_forward_kernels(problem_key(causal), Arch::sm_90a);
  ASSERT_FALSE(specs.at(0).persistent);
  specs[0].persistent = true;  // as a tuned entry asks
  ASSERT_TRUE(specs[0].problems().empty()) << specs[0].uri();
  EXPECT_EQ(plan_forward(ForwardArgs{}, causal, specs, 1, nullptr, 132).at(0).grid,
            (std::array<unsigned, 3>{132, 1, 1}));
  const Problem few = prefill(1, 300, 2, 128, true);  // 3 x 2 tiles
  specs = select_forward_kernels(problem_key(few), Arch::sm_90a);
  specs[0].persistent = true;
  EXPECT_EQ(plan_forward(ForwardArgs{}, few, specs, 1, nullptr, 132).at(0).grid, (std::array<unsigned, 3>{6, 1, 1}));
}

TEST(PersistentPlan, MaskedAndWideTilesKeepOneCtaPerTile) {
  const Problem causal = prefill(4, 4096, 16, 128, true);
  EXPECT_FALSE(select_forward_kernels(problem_key(causal), Arch::sm_90a).at(0).persistent);
  EXPECT_EQ(grid(causal, 132), (std::array<unsigned, 3>{32, 16, 4}));
  // d256's 128x80 tiles fit persistent with O over the V ring; one stage of 112 keys is too small
  // a ring for the 128 rows of O (and O's own tile does not fit beside it).
  const Problem d256 = prefill(2, 2048, 8, 256, false);
  EXPECT_TRUE(select_forward_kernels(problem_key(d256), Arch::sm_90a).at(0).persistent);
  KernelSpec s = select_forward_kernels(problem_key(d256), Arch::sm_90a).at(0);
  s.block_n = 112;
  s.stages = 1;
  ASSERT_TRUE(s.o_staged_over_v());
  const std::vector<std::string> problems = s.problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("expected it to fit over the V ring"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace flashgen
