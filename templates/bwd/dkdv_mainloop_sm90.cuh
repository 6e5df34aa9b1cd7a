// dK/dV mainloop on wgmma (sm_90a), two warpgroups of 64 keys each (d64/96/128): per Q tile
// S^T and dP^T are one wgmma group, P^T and dS^T stay in registers as the A operands of the
// dV and dK products, and (unless deterministic) dS^T goes through shared memory into
// dQ_accum += dS.K with vector atomics.
#pragma once

#include "arch/fence.cuh"
#include "bwd/dkdv_layout.cuh"
#include "bwd/dkdv_scores.cuh"
#include "bwd/dq_accum.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct DkdvMainloopSm90 {
  static_assert(Cfg::kWgmma, "DkdvMainloopSm90 runs on wgmma");
  using Layout = DkdvLayout<Cfg, false>;
  using Split = DkdvWarpSplit<Cfg>;
  using Pipeline = CpAsyncPipeline<Cfg::kStages, true>;
  static_assert(Split::kRT == 1, "a warp's 16 keys are its rows of the warpgroup's 64");

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

    float s[1][kMT][4], dp[1][kMT][4];
    wgmma_fence();
    wgmma_scores_t<Cfg, L>(s[0], l.s_k, split.warp_row0 & ~63, s_q);
    wgmma_scores_t<Cfg, L>(dp[0], l.s_v, split.warp_row0 & ~63, s_do);
    wgmma_commit();
    wgmma_wait<0>();
    float dtanh[1][kMT][4];  // unused (and optimised away) without softcap
    probs_t<Cfg>(s, dtanh, p, vis, softcap_pre, l.s_lse(stage), n0, n0 + split.warp_row0, m0, lane);

    u32 a_p[kMT / 2][4];  // P^T as the A operand of the dV product
#pragma unroll
    for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_p[kk], s[0], kk);
    dscores_t<Cfg>(dp, s, dtanh, l.s_dsum(stage), lane);
    u32 a_ds[kMT / 2][4];
#pragma unroll
    for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_ds[kk], dp[0], kk);
    if (!Cfg::kDeterministic && Split::warp_d(warp) == 0)
      store_t<typename L::DS, kMT>(l.s_ds, a_ds, split.warp_row0, lane);  // for the dQ product
    wgmma_fence();
    wgmma_regs_t<Cfg, L, kMT>(acc_dv[0], a_p, s_do, split.d0);
    wgmma_regs_t<Cfg, L, kMT>(acc_dk[0], a_ds, s_q, split.d0);
    wgmma_commit();
    if constexpr (!Cfg::kDeterministic) {
      // Frees the P^T and dS^T fragments before the dQ accumulators go live.
      wgmma_wait<0>();
      fence_async_shared();
      __syncthreads();
      DqAccumSm90<Cfg, L>::accumulate(p.dq_accum + (off.accum_row(h) + m0) * Cfg::kHeadDimPadded, l, warp, lane);
    }
    wgmma_wait<0>();  // the products read the stage until they complete
  }
};

}  // namespace flash
