// dK/dV mainloop on mma.sync (sm_80+): per Q tile, every warp its 16-row key slices (and,
// with more warps than slices, a share of the head dim):
//   S^T = K.Q^T, P^T from lse, dP^T = V.dO^T, dV += P^T.dO, dS^T = P^T * (dP^T - D), dK += dS^T.Q,
// then (unless deterministic) dS^T through shared memory into dQ_accum += dS.K with atomics.
#pragma once

#include "bwd/dkdv_layout.cuh"
#include "bwd/dkdv_scores.cuh"
#include "bwd/dq_accum.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/copy.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct DkdvMainloopSm80 {
  static_assert(!Cfg::kWgmma, "DkdvMainloopSm80 runs on mma.sync");
  using Layout = DkdvLayout<Cfg, false>;
  using Split = DkdvWarpSplit<Cfg>;
  using Pipeline = CpAsyncPipeline<Cfg::kStages, false>;

  // Q tile m0 of query head h (in `stage`) folded into dK and dV.
  template <class Vis>
  static __device__ __forceinline__ void consume(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                 const Vis& vis, const Layout& l, const Split& split, int stage, int h,
                                                 int m0, int n0, int tid, int warp, int lane, float softcap_pre,
                                                 typename Split::Accumulator& acc_dk,
                                                 typename Split::Accumulator& acc_dv) {
    using L = Layout;
    constexpr bool kBf16 = Cfg::kIsBf16;
    constexpr int kRT = Split::kRT, kMT = Split::kMT, kDT = Split::kDT;
    const u32 s_q = l.s_q(stage), s_do = l.s_do(stage);

    // (computed before the products: later it costs the d128 kernels spills at 255 registers)
    float* dq_acc = p.dq_accum + (off.accum_row(h) + m0) * Cfg::kHeadDimPadded;
    float s[kRT][kMT][4], dp[kRT][kMT][4];
    zero(s);
    mma_rows_nk<kBf16, kRT, kMT, Cfg::kHeadDimPadded, typename L::KV, typename L::Q>(s, l.s_k, split.warp_row0, s_q,
                                                                                      0, lane);
    float dtanh[kRT][kMT][4];  // unused (and optimised away) without softcap
    probs_t<Cfg>(s, dtanh, p, vis, softcap_pre, l.s_lse(stage), n0, n0 + split.warp_row0, m0, lane);
    zero(dp);
    mma_rows_nk<kBf16, kRT, kMT, Cfg::kHeadDimPadded, typename L::KV, typename L::Q>(dp, l.s_v, split.warp_row0,
                                                                                      s_do, 0, lane);
    mma_regs_kn<kBf16, kRT, kMT, kDT, typename L::Q>(acc_dv, s, s_do, split.d0, lane);
    dscores_t<Cfg>(dp, s, dtanh, l.s_dsum(stage), lane);
    mma_regs_kn<kBf16, kRT, kMT, kDT, typename L::Q>(acc_dk, dp, s_q, split.d0, lane);

    if constexpr (!Cfg::kDeterministic) {
      // dS^T -> shared memory (one copy: the warps of the first head-dim slice), then dQ.
      if (Split::warp_d(warp) == 0)
        store_fragments<typename Cfg::Element, typename L::DS, false>(l.s_ds, dp, split.warp_row0, 0, 1.0f, lane);
      __syncthreads();
      DqAccumSm80<Cfg, L>::accumulate(dq_acc, l, warp, lane);
    }
  }
};

}  // namespace flash
