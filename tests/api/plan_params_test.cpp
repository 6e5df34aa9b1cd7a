// Parameters the launch plans derive for the kernels (runtime/launch_plan.cpp): GQA's group,
// divided once on the host, and the dQ accumulator's column order, which is its writer's: the
// warp-specialised dK/dV kernels reduce it in fragment order (bwd/dq_staging.cuh), the atomic
// paths in natural order, and bwd_dq_convert reads whichever the plan's dK/dV kernel wrote.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "compiler/kernel_selection.h"
#include "runtime/launch_plan.h"
#include "runtime/tensor_maps.h"

namespace flashgen {
namespace {

Problem prefill(long long heads_q, long long heads_kv, long long head_dim) {
  Problem p;
  p.batch = 2, p.seqlen_q = p.seqlen_k = 1000;
  p.heads_q = heads_q, p.heads_kv = heads_kv, p.head_dim = head_dim, p.dtype = DType::bf16, p.device = 0;
  p.options.softmax_scale = 0.09f;
  return p;
}

// The fragment-order flag of every launch of the backward's plan on `arch`, and whether the
// plan's dK/dV kernel reduces dQ through the accumulator's TMA map.
struct BackwardOrder {
  std::set<int> flags;
  bool tma_reduced = false;
};

BackwardOrder backward_order(const Problem& p, Arch arch) {
  BackwardOrder out;
  for (const KernelLaunch& l : plan_backward(BackwardArgs{}, p, arch, nullptr)) {
    out.flags.insert(l.params.dq_accum_fragment_order);
    if (l.spec.pass == Pass::bwd_dkdv) out.tma_reduced = needs_dq_accum_map(l.spec);
  }
  return out;
}

// The forward plan's first launch's parameters.
FlashAttentionParams forward_params(const Problem& p, Arch arch) {
  return plan_forward(ForwardArgs{}, p, select_forward_kernels(problem_key(p), arch), 1, nullptr, 132).at(0).params;
}

TEST(PlanParams, TheGqaGroupIsDividedOnTheHostForEveryPass) {
  const Problem p = prefill(12, 4, 128);
  for (const KernelLaunch& l : plan_backward(BackwardArgs{}, p, Arch::sm_90a, nullptr))
    EXPECT_EQ(l.params.heads_per_kv, 3) << l.spec.uri();
  EXPECT_EQ(forward_params(p, Arch::sm_90a).heads_per_kv, 3);
  EXPECT_EQ(forward_params(prefill(5, 5, 64), Arch::sm_80).heads_per_kv, 1);
}

TEST(PlanParams, TheDqAccumulatorIsInFragmentOrderExactlyWhenTheDkdvKernelReducesItByTma) {
  for (int d : {64, 96, 128, 256}) {
    const BackwardOrder ws = backward_order(prefill(8, 2, d), Arch::sm_90a);
    EXPECT_TRUE(ws.tma_reduced) << "d" << d;
    EXPECT_EQ(ws.flags, std::set<int>{1}) << "d" << d;  // the convert's launch too
    const BackwardOrder sm80 = backward_order(prefill(8, 2, d), Arch::sm_80);
    EXPECT_FALSE(sm80.tma_reduced) << "d" << d;
    EXPECT_EQ(sm80.flags, std::set<int>{0}) << "d" << d;
  }
  Problem softcap = prefill(8, 8, 128);  // softcap: the warp-specialised kernel on 64-query tiles
  softcap.options.softcap = 30.0f;
  const BackwardOrder capped = backward_order(softcap, Arch::sm_90a);
  EXPECT_TRUE(capped.tma_reduced);
  EXPECT_EQ(capped.flags, std::set<int>{1});
  // Rows that are not 16-byte multiples: sm_90a's mma.sync dK/dV kernel, atomic dQ.
  const BackwardOrder atomic = backward_order(prefill(8, 8, 100), Arch::sm_90a);
  EXPECT_FALSE(atomic.tma_reduced);
  EXPECT_EQ(atomic.flags, std::set<int>{0});
}

TEST(PlanParams, FragmentOrderPutsEachEightColumnGroupsEvenColumnsFirst) {
  const int expected[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // position of column c within its group
  std::set<int> positions;
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(flash_dq_accum_position(c), c / 8 * 8 + expected[c % 8]) << c;
    positions.insert(flash_dq_accum_position(c));
  }
  EXPECT_EQ(positions.size(), 256u);  // a permutation
}

}  // namespace
}  // namespace flashgen
