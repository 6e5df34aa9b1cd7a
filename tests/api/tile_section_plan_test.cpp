// The CTA order of masked single-tile grids (runtime/launch_plan.cpp, tile_section): causal and
// windowed forwards of 16 or more query tiles per slice get L2-sized sections of (head, batch)
// slices, so their heaviest tiles start first (scheduler/single_tile.cuh); unmasked forwards and
// short rows keep the grid's order. The masked dK/dV grid gets the same order from its shape.
#include <gtest/gtest.h>

#include <array>
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

std::array<unsigned, 3> dkdv_grid(const Problem& p) {
  for (const KernelLaunch& l : plan_backward(BackwardArgs{}, p, Arch::sm_90a, nullptr))
    if (l.spec.pass == Pass::bwd_dkdv) return l.grid;
  ADD_FAILURE() << "no dK/dV launch";
  return {};
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

// The masked warp-specialised dK/dV grid is (slices per section, key blocks, sections)
// (scheduler/section_grid.cuh); a slice reads its queries' Q, dO and dQ rows, 8 bytes per
// element.
TEST(TileSectionPlan, MaskedDkdvGridsAreBlockMajorInSections) {
  // 4096 x 128 x 8 bytes = 4 MiB a slice: 8 slices in 32 MiB, 64 slices in 8 sections.
  EXPECT_EQ(dkdv_grid(causal(prefill(4, 4096, 16, 16, 128))), (std::array<unsigned, 3>{8, 32, 8}));
  Problem window = prefill(4, 4096, 16, 16, 128);
  window.options.window_left = 256;
  EXPECT_EQ(dkdv_grid(window), (std::array<unsigned, 3>{8, 32, 8}));
  // GQA: a key/value head's slice reads its 4 query heads' rows (32 MiB): one slice a section.
  EXPECT_EQ(dkdv_grid(causal(prefill(1, 16384, 16, 4, 64))), (std::array<unsigned, 3>{1, 128, 4}));
  // Short rows (8 key blocks): one slice a section, i.e. the plain grid's order.
  EXPECT_EQ(dkdv_grid(causal(prefill(16, 1024, 16, 16, 128))), (std::array<unsigned, 3>{1, 8, 256}));
  // gridDim.z stays within 65,535: sections grow to fit.
  EXPECT_EQ(dkdv_grid(causal(prefill(70000, 128, 1, 1, 64))), (std::array<unsigned, 3>{2, 1, 35000}));
  // Unmasked: (key blocks, key/value heads, batch).
  EXPECT_EQ(dkdv_grid(prefill(4, 4096, 16, 16, 128)), (std::array<unsigned, 3>{32, 16, 4}));
}

TEST(TileSectionPlan, DecodeKeepsItsOwnScheduler) {
  Problem decode = causal(prefill(8, 1, 32, 8, 128));
  decode.seqlen_k = 8192;
  EXPECT_EQ(forward_section(decode), 0);
}

}  // namespace
}  // namespace flashgen
