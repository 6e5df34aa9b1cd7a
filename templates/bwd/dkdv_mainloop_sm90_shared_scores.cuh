// dK/dV mainloop on wgmma (sm_90a) at d256, "shared scores": both warpgroups own the same
// 64 keys and one half of the head dim each. Warpgroup 0 computes S^T, warpgroup 1 dP^T and
// hands it over through shared memory; warpgroup 0 turns them into P^T and dS^T, stored for
// both warpgroups' dV and dK products (5 products per tile instead of 7); then (unless
// deterministic) dQ_accum += dS.K from the stored dS^T.
#pragma once

#include "arch/fence.cuh"
#include "bwd/dkdv_layout.cuh"
#include "bwd/dkdv_scores.cuh"
#include "bwd/dq_accum.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct DkdvMainloopSm90SharedScores {
  static_assert(Cfg::kWgmma && Cfg::kWarps == 8 && Cfg::kBlockN == 64, "two warpgroups on the same 64 keys");
  using Layout = DkdvLayout<Cfg, true>;
  using Split = DkdvWarpSplit<Cfg>;
  using Pipeline = CpAsyncPipeline<Cfg::kStages, true>;
  static_assert(Split::kRT == 1 && Split::kWarpsD == 2, "one head-dim half per warpgroup");

  template <class Vis>
  static __device__ __forceinline__ void consume(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                 const Vis& vis, const Layout& l, const Split& split, int stage, int h,
                                                 int m0, int n0, int tid, int warp, int lane, float softcap_pre,
                                                 typename Split::Accumulator& acc_dk,
                                                 typename Split::Accumulator& acc_dv) {
    using L = Layout;
    constexpr bool kBf16 = Cfg::kIsBf16;
    constexpr int kMT = Split::kMT;
    const u32 s_q = l.s_q(stage), s_do = l.s_do(stage);
    // Only warpgroup 0 does the element-wise work.
    const bool elementwise = warp < 4;

    // Warpgroup 0: S^T; warpgroup 1: dP^T, handed over in fragment order (thread i of
    // warpgroup 1 -> thread i of warpgroup 0: the same fragment positions).
    float s[1][kMT][4], dp[1][kMT][4];
    // (computed before the products: later it costs 12 bytes of spills at 255 registers)
    float* dq_acc = p.dq_accum + (off.accum_row(h) + m0) * Cfg::kHeadDimPadded;
    const u32 dpt_slot = hand_over_slot(l.s_dpt, tid);
    // The same instructions in both warpgroups (one accumulator: S^T, or dP^T in warpgroup 1).
    wgmma_fence();
    wgmma_scores_t<Cfg, L>(s[0], elementwise ? l.s_k : l.s_v, 0, elementwise ? s_q : s_do);
    wgmma_commit();
    wgmma_wait<0>();
    if (!elementwise) hand_over_fragments(dpt_slot, s[0]);
    __syncthreads();
    if (elementwise) take_over_fragments(dpt_slot, dp[0]);
    float dtanh[1][kMT][4];  // unused (and optimised away) without softcap
    if (elementwise) probs_t<Cfg>(s, dtanh, p, vis, softcap_pre, l.s_lse(stage), n0, n0 + split.warp_row0, m0, lane);

    if (elementwise) {  // (warpgroup 1 has no S^T: reading it would keep it live)
      u32 a_p[kMT / 2][4];
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_p[kk], s[0], kk);
      store_t<typename L::DS, kMT>(l.s_pt, a_p, split.warp_row0, lane);  // for both warpgroups' dV
    }
    if (elementwise) dscores_t<Cfg>(dp, s, dtanh, l.s_dsum(stage), lane);
    // dS^T -> shared memory (P^T is there already), then both warpgroups' dV and dK halves.
    if (elementwise) {
      u32 a_ds[kMT / 2][4];
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_ds[kk], dp[0], kk);
      store_t<typename L::DS, kMT>(l.s_ds, a_ds, split.warp_row0, lane);
    }
    fence_async_shared();
    __syncthreads();
    wgmma_fence();
    wgmma_smem_t<Cfg, L>(acc_dv[0], l.s_pt, s_do, split.d0);
    wgmma_smem_t<Cfg, L>(acc_dk[0], l.s_ds, s_q, split.d0);
    wgmma_commit();  // (the dQ parts queue behind them)
    if constexpr (!Cfg::kDeterministic)
      DqAccumSm90<Cfg, L>::accumulate(dq_acc, l, warp, lane);
    wgmma_wait<0>();  // the products read the stage until they complete
  }
};

}  // namespace flash
