// The CTA order of masked single-tile grids (runtime/launch_plan.cpp, tile_section): causal and
// windowed forwards of 16 or more query tiles per slice get L2-sized sections of (head, batch)
// slices, so their heaviest tiles start first (scheduler/single_tile.cuh); unmasked forwards,
// short rows and the dK/dV grid (whose kernel reads its tile off the grid) keep the grid's order.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/kernel_selection.h"
#include "runtime/launch_plan.h"

namespace flashgen {
namespace {

Problem prefill(long long batch, long long seqlen, long long heads_q, long long heads_kv, long long head_dim) {
  Problem p;
  p.batch = batch, p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = heads_q, p.heads_kv = heads_kv, p.head_dim = head_dim, p.dtype = DType::bf16, p.device = 0;
  p.options.softmax_scale = 0.088f;
  return p;
}

Problem causal(Problem p) {
  p.options.causal = true;
  p.options.window_right = 0;
  return p;
}

int forward_section(const Problem& p) {
  const std::vector<KernelSpec> specs = select_forward_kernels(problem_key(p), Arch::sm_90a);
  return plan_forward(ForwardArgs{}, p, specs, 1, nullptr, 132).at(0).params.tile_section;
}

int dkdv_section(const Problem& p) {
  for (const KernelLaunch& l : plan_backward(BackwardArgs{}, p, Arch::sm_90a, nullptr))
    if (l.spec.pass == Pass::bwd_dkdv) return l.params.tile_section;
  ADD_FAILURE() << "no dK/dV launch";
  return -1;
}

TEST(TileSectionPlan, UnmaskedGridsKeepTheirOrder) {
  EXPECT_EQ(forward_section(prefill(4, 4096, 16, 16, 128)), 1);
  EXPECT_EQ(forward_section(prefill(4, 4096, 16, 16, 256)), 1);  // single-tile (not persistent) at d256
}

TEST(TileSectionPlan, MaskedForwardsGetSectionsThatFitTheL2Budget) {
  // A slice shares K and V, 2 x 4096 x 128 x 2 bytes = 2 MiB: 16 slices in 32 MiB.
  EXPECT_EQ(forward_section(causal(prefill(4, 4096, 16, 16, 128))), 16);
  Problem window = prefill(4, 4096, 16, 16, 128);
  window.options.window_left = 256;
  EXPECT_EQ(forward_section(window), 16);
  // Long rows: a slice alone exceeds the budget, one slice a section (the grid's order).
  EXPECT_EQ(forward_section(causal(prefill(1, 131072, 8, 8, 128))), 1);
  // No more sections than slices.
  EXPECT_EQ(forward_section(causal(prefill(1, 4096, 3, 3, 64))), 3);
  // Short rows (8 query tiles of 128 a slice at 1k): the grid's order.
  EXPECT_EQ(forward_section(causal(prefill(16, 1024, 16, 16, 128))), 1);
}

TEST(TileSectionPlan, TheDkdvGridKeepsItsOrder) {
  EXPECT_EQ(dkdv_section(causal(prefill(4, 4096, 16, 16, 128))), 0);
  EXPECT_EQ(dkdv_section(causal(prefill(1, 16384, 16, 4, 64))), 0);
}

TEST(TileSectionPlan, DecodeKeepsItsOwnScheduler) {
  Problem decode = causal(prefill(8, 1, 32, 8, 128));
  decode.seqlen_k = 8192;
  EXPECT_EQ(forward_section(decode), 0);
}

}  // namespace
}  // namespace flashgen
