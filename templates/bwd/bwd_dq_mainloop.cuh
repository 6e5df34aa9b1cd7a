// The dQ mainloop of the deterministic backward (no atomics), for one Q tile of one
// (batch, head): the producer loads Q and dO once and streams the K/V tiles the Q tile sees;
// the consumer recomputes P from lse, dP = dO.V^T, dS = P * (dP - D) (times the softcap
// derivative) and accumulates dQ += dS.K with dS reused from registers (mma.sync).
#pragma once

#include "attention/offsets.cuh"
#include "attention/softcap.cuh"
#include "attention/visibility.cuh"
#include "params/kernel_traits.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/copy.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct BwdDqMainloop {
  static constexpr int kRT = Cfg::kBlockM / (16 * Cfg::kWarps);
  static constexpr int kNT = Cfg::kBlockN / 8;
  static constexpr int kDT = Cfg::kHeadDimPadded / 8;
  static_assert(!Cfg::kWgmma, "the dQ kernel runs on mma.sync");

  // Shared memory: the Q and dO tiles, then kStages x (K tile, V tile).
  struct Layout {
    using Q = SmemTile<Cfg::kBlockM, Cfg::kHeadDimPadded>;  // Q and dO
    using KV = SmemTile<Cfg::kBlockN, Cfg::kHeadDimPadded>;
    static constexpr int kStageBytes = 2 * KV::kBytes;
    static constexpr int kBytes = 2 * Q::kBytes + Cfg::kStages * kStageBytes;
  };
  using Pipeline = CpAsyncPipeline<Cfg::kStages, false>;
  using Accumulator = float[kRT][kDT][4];

  // Shared tiles, K and V at row 0 of the head, the tile's valid query rows. Strides and
  // lengths are read from the parameter block where used (constant-bank operands).
  u32 s_q, s_do, s_kv;
  const u16 *k, *v;
  int rows_q;

  __device__ __forceinline__ BwdDqMainloop(const typename Cfg::Offsets& off, u32 smem, int h_kv, int rows_q_)
      : s_q(smem), s_do(smem + Layout::Q::kBytes), s_kv(smem + 2 * Layout::Q::kBytes), k(off.k(h_kv, 0)),
        v(off.v(h_kv, 0)), rows_q(rows_q_) {}

  // Producer: Q and dO (one commit group, before the K/V pipeline's).
  __device__ __forceinline__ void load_q_do(const FlashAttentionParams& p, const typename Cfg::Offsets& off, int h, int m0,
                                            int tid) const {
    using Q = typename Layout::Q;
    load_tile<Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(s_q, off.q(h, m0), p.q_stride.row, rows_q, tid);
    load_tile<Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(s_do, off.dout(h, m0), p.dout_stride.row, rows_q, tid);
    cp_async_commit();
  }

  // Producer: K/V tile n_block into `stage`.
  __device__ __forceinline__ void load_kv(const FlashAttentionParams& p, const typename Cfg::Offsets& off, int n_block,
                                          int stage, int tid) const {
    const int n0 = n_block * Cfg::kBlockN;
    load_kv_tiles<typename Layout::KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
        s_kv + stage * Layout::kStageBytes, k, p.k_stride.row, v, p.v_stride.row, n0, off.seqlen_k() - n0, tid);
  }

  // Consumer: K/V tile n_block (in `stage`) folded into dQ. lse_log2 and dsum hold the warp's
  // rows' lse * log2e (+inf: P = 0) and D.
  template <class Vis>
  __device__ __forceinline__ void consume(const FlashAttentionParams& p, const Vis& vis, int stage, int n_block, int m0,
                                          int warp_row0, int lane, float softcap_pre, const float (&lse_log2)[kRT][2],
                                          const float (&dsum)[kRT][2], Accumulator& acc_dq) const {
    using L = Layout;
    constexpr bool kBf16 = Cfg::kIsBf16;
    const u32 s_k = s_kv + stage * L::kStageBytes;
    const u32 s_v = s_k + L::KV::kBytes;
    const int n0 = n_block * Cfg::kBlockN;

    float s[kRT][kNT][4];
    zero(s);
    mma_rows_nk<kBf16, kRT, kNT, Cfg::kHeadDimPadded, typename L::Q, typename L::KV>(s, s_q, warp_row0, s_k, 0, lane);
    float dtanh[kRT][kNT][4];  // unused (and optimised away) without softcap
    if constexpr (Cfg::kSoftcap) softcap_scores_and_slope(s, dtanh, softcap_pre, p.softcap);
    if (!vis.tile_visible(m0, m0 + rows_q, n0, n0 + Cfg::kBlockN)) mask_scores<true>(s, vis, m0 + warp_row0, n0, lane);

    float dp[kRT][kNT][4];
    zero(dp);
    mma_rows_nk<kBf16, kRT, kNT, Cfg::kHeadDimPadded, typename L::Q, typename L::KV>(dp, s_do, warp_row0, s_v, 0,
                                                                                      lane);
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int hh = e >> 1;
          const float pr = exp2_fast(fmaf(s[mt][nt][e], p.scale_log2, -lse_log2[mt][hh]));
          float ds = pr * (dp[mt][nt][e] - dsum[mt][hh]);
          if constexpr (Cfg::kSoftcap) ds *= dtanh[mt][nt][e];
          dp[mt][nt][e] = ds;
        }
    mma_regs_kn<kBf16, kRT, kNT, kDT, typename L::KV>(acc_dq, dp, s_k, 0, lane);
  }
};

}  // namespace flash
