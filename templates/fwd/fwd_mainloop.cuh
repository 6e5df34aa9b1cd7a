// The forward mainloop (the seed's ledger algorithm) for one Q tile of one (batch, head):
// the producer loads Q once and the K/V tiles the Q tile can see; the consumer folds each
// K/V tile in: S = Q.K^T on tensor cores, the mask on boundary / diagonal tiles only, the
// online softmax with m, l in registers, P rounded to 16 bits in registers and used directly
// as the A operand of O += P.V. Both roles run on every warp (cp.async); products are
// mma.sync (sm_80+, warps own 16-row slices) or, with kWgmma (sm_90a), wgmma with Q, K and
// V read straight from shared memory (a warpgroup owns 64 rows).
#pragma once

#include "arch/fence.cuh"
#include "attention/offsets.cuh"
#include "attention/softcap.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "params/kernel_traits.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/copy.cuh"
#include "tile/warp_mma.cuh"
#include "tile/warpgroup_mma.cuh"

namespace flash {

template <class Cfg>
struct FwdMainloop {
  static constexpr int kRT = Cfg::kBlockM / (16 * Cfg::kWarps);  // 16-row slices per warp
  static constexpr int kNT = Cfg::kBlockN / 8;
  static constexpr int kDT = Cfg::kHeadDimPadded / 8;
  static_assert(!Cfg::kWgmma || kRT == 1, "wgmma: 4 warps (a warpgroup) per 64 query rows");

  // Shared memory: the Q tile, then kStages x (K tile, V tile).
  struct Layout {
    using Q = typename Cfg::template Tile<Cfg::kBlockM, Cfg::kHeadDimCols>;
    using KV = typename Cfg::template Tile<Cfg::kBlockN, Cfg::kHeadDimCols>;
    static constexpr int kStageBytes = 2 * KV::kBytes;  // K then V
    static constexpr int kBytes = Q::kBytes + Cfg::kStages * kStageBytes;
  };
  using Pipeline = CpAsyncPipeline<Cfg::kStages, Cfg::kWgmma>;
  using Accumulator = float[kRT][kDT][4];

  // Shared tiles, K and V at row 0 of the head, the tile's valid query rows. Strides and
  // lengths are read from the parameter block where used (constant-bank operands).
  u32 s_q, s_kv;
  const u16 *k, *v;
  int rows_q;

  __device__ __forceinline__ FwdMainloop(const typename Cfg::Offsets& off, u32 smem, int h_kv, int rows_q_)
      : s_q(smem), s_kv(smem + Layout::Q::kBytes), k(off.k(h_kv, 0)), v(off.v(h_kv, 0)), rows_q(rows_q_) {}

  // Producer: Q (one commit group of its own, before the K/V pipeline's).
  __device__ __forceinline__ void load_q(const FlashAttentionParams& p, const typename Cfg::Offsets& off, int h, int m0,
                                         int tid) const {
    load_tile<typename Layout::Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(s_q, off.q(h, m0), p.q_stride.row,
                                                                               rows_q, tid);
    cp_async_commit();
  }

  // Producer: K/V tile n_block into `stage`.
  __device__ __forceinline__ void load_kv(const FlashAttentionParams& p, const typename Cfg::Offsets& off, int n_block,
                                          int stage, int tid) const {
    const int n0 = n_block * Cfg::kBlockN;
    load_kv_tiles<typename Layout::KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
        s_kv + stage * Layout::kStageBytes, k, p.k_stride.row, v, p.v_stride.row, n0, off.seqlen_k() - n0, tid);
  }

  // Consumer: K/V tile n_block (in `stage`) folded into O and the ledger. The warp's rows start
  // at warp_row0 of the tile, whose first query is m0.
  template <class Vis>
  __device__ __forceinline__ void consume(const FlashAttentionParams& p, const Vis& vis, int stage, int n_block, int m0,
                                          int warp_row0, int lane, float softcap_pre, Accumulator& acc_o,
                                          SoftmaxLedger<kRT>& ledger) const {
    using L = Layout;
    const u32 s_k = s_kv + stage * L::kStageBytes;
    const u32 s_v = s_k + L::KV::kBytes;
    const int n0 = n_block * Cfg::kBlockN;

    float s[kRT][kNT][4];
    if constexpr (Cfg::kWgmma) {
      scores_wgmma(s[0], warp_row0 & ~63, s_k);
    } else {
      zero(s);
      mma_rows_nk<Cfg::kIsBf16, kRT, kNT, Cfg::kHeadDimPadded, typename L::Q, typename L::KV>(s, s_q, warp_row0, s_k,
                                                                                          0, lane);
    }
    if constexpr (Cfg::kSoftcap) softcap_scores(s, softcap_pre, p.softcap);
    if (!vis.tile_visible(m0, m0 + rows_q, n0, n0 + Cfg::kBlockN)) mask_scores<true>(s, vis, m0 + warp_row0, n0, lane);
    ledger.update(s, acc_o, p.scale_log2);
    if constexpr (Cfg::kWgmma)
      p_v_wgmma(acc_o[0], s[0], s_v);
    else
      mma_regs_kn<Cfg::kIsBf16, kRT, kNT, kDT, typename L::KV>(acc_o, s, s_v, 0, lane);
  }

 private:
  // sm_90a: S (64 x kBlockN) = Q rows q_row0.. . K^T, both K-major in shared memory; one wgmma
  // group that the warpgroup waits for.
  __device__ __forceinline__ void scores_wgmma(float (&s)[kNT][4], int q_row0, u32 s_k) const {
    using L = Layout;
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < Cfg::kHeadDimPadded; kc += 16)
      Wgmma<kNT * 8, Cfg::kIsBf16>::template ss<false, false>(s, desc_k_major<typename L::Q>(s_q, q_row0, kc),
                                                              desc_k_major<typename L::KV>(s_k, 0, kc), kc > 0);
    wgmma_commit();
    wgmma_wait<0>();
  }

  // sm_90a: O += P.V with P in registers (rounded to 16 bits here) and V MN-major in shared memory.
  __device__ __forceinline__ void p_v_wgmma(float (&o)[kDT][4], const float (&pr)[kNT][4], u32 s_v) const {
    u32 a[kNT / 2][4];
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) c_to_a<Cfg::kIsBf16>(a[kk], pr, kk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) wgmma_rs_mn_major<Cfg::kIsBf16, typename Layout::KV>(o, a[kk], s_v, 16 * kk);
    wgmma_commit();
    wgmma_wait<0>();
  }
};

}  // namespace flash
