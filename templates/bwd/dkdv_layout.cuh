// The pieces every dK/dV mainloop shares: the shared-memory layout (K, V, the ring of
// Q/dO/lse/D stages, the score tiles), the warp split of the dK/dV accumulators, and the
// producer that fills the stages.
#pragma once

#include "arch/numeric.cuh"
#include "arch/ptx.cuh"
#include "attention/offsets.cuh"
#include "attention/visibility.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

// kSharedScores (wgmma at d256): both warpgroups on the same keys, so the layout also holds
// P^T and warpgroup 1's fp32 dP^T fragments next to dS^T.
template <class Cfg, bool kSharedScores>
struct DkdvLayout {
  using KV = typename Cfg::template Tile<Cfg::kBlockN, Cfg::kHeadDimCols>;
  using Q = typename Cfg::template Tile<Cfg::kBlockM, Cfg::kHeadDimCols>;  // Q and dO
  // dS^T (the dQ product's A), P^T; dS [query][key] where the queries are no whole 64-column
  // blocks (80-query tiles: the swapped dQ product reads it K-major).
  static constexpr bool kDsByQuery = Cfg::kWgmma && Cfg::kBlockM % 64 != 0;
  using DS = typename Select<kDsByQuery, typename Cfg::template Tile<Cfg::kBlockM, Cfg::kBlockN>,
                             typename Cfg::template Tile<Cfg::kBlockN, Cfg::kBlockM>>::type;
  // A stage: Q, dO, lse*log2e, D; wgmma tiles start 1024-byte aligned.
  static constexpr int kAlign = Cfg::kWgmma ? 1024 : 16;
  static constexpr int kStageBytes = (2 * Q::kBytes + 2 * Cfg::kBlockM * 4 + kAlign - 1) / kAlign * kAlign;
  // Shared scores: dS^T, P^T and warpgroup 1's dP^T fragments (fp32); otherwise dS^T for the
  // atomic dQ product (none when deterministic).
  static constexpr int kScoreBytes = kSharedScores ? 2 * DS::kBytes + Cfg::kBlockN * Cfg::kBlockM * 4
                                                   : (Cfg::kDeterministic ? 0 : DS::kBytes);
  static constexpr int kBytes = 2 * KV::kBytes + Cfg::kStages * kStageBytes + kScoreBytes;

  u32 s_k, s_v, s_stages, s_ds, s_pt, s_dpt;  // s_pt, s_dpt: shared scores only

  __device__ __forceinline__ explicit DkdvLayout(u32 smem)
      : s_k(smem), s_v(smem + KV::kBytes), s_stages(smem + 2 * KV::kBytes),
        s_ds(smem + 2 * KV::kBytes + Cfg::kStages * kStageBytes), s_pt(s_ds + DS::kBytes), s_dpt(s_pt + DS::kBytes) {}

  __device__ __forceinline__ u32 s_q(int stage) const { return s_stages + stage * kStageBytes; }
  __device__ __forceinline__ u32 s_do(int stage) const { return s_q(stage) + Q::kBytes; }
  __device__ __forceinline__ u32 s_lse(int stage) const { return s_do(stage) + Q::kBytes; }
  __device__ __forceinline__ u32 s_dsum(int stage) const { return s_lse(stage) + 4 * Cfg::kBlockM; }
};

// The work items of a K/V tile (keys n0.., rows_k of them, of kv head h_kv): every query head
// of its GQA group times the Q tiles that see the keys. Item t is query head
// h_kv * group + t / tiles_per_head, Q tile m_begin + t % tiles_per_head.
template <class Cfg>
struct DkdvWorkItems {
  int h_kv, group, m_begin, tiles_per_head, total;

  template <class Vis>
  __device__ __forceinline__ DkdvWorkItems(const Vis& vis, int h_kv_, int group_, int n0, int rows_k)
      : h_kv(h_kv_), group(group_) {
    int q_lo, q_hi, m_end;
    vis.query_range(n0, n0 + rows_k, q_lo, q_hi);
    tile_span<Cfg::kBlockM>(q_lo, q_hi, m_begin, m_end);
    tiles_per_head = m_end - m_begin;
    total = group * tiles_per_head;
  }

  __device__ __forceinline__ int head(int t) const { return h_kv * group + t / tiles_per_head; }
  __device__ __forceinline__ int m0(int t) const { return (m_begin + t % tiles_per_head) * Cfg::kBlockM; }
};

// kWarps warps (the CTA's, or a warp-specialised kernel's consumer warps) split the keys in
// 16-row slices and, when there are more warps than slices, the head dim of the dK/dV accumulators.
template <class Cfg, int kWarps = Cfg::kWarps>
struct DkdvWarpSplit {
  static constexpr int kWarpsN = kWarps < Cfg::kBlockN / 16 ? kWarps : Cfg::kBlockN / 16;
  static constexpr int kWarpsD = kWarps / kWarpsN;
  static constexpr int kRT = Cfg::kBlockN / (16 * kWarpsN);  // key slices per warp
  static constexpr int kMT = Cfg::kBlockM / 8;               // query n8 tiles of S^T
  static constexpr int kDAcc = Cfg::kHeadDimPadded / kWarpsD;
  static constexpr int kDT = kDAcc / 8;
  using Accumulator = float[kRT][kDT][4];

  int warp_row0, d0;  // the warp's first key (in the tile) and first dK/dV column

  __device__ __forceinline__ explicit DkdvWarpSplit(int warp)
      : warp_row0((warp % kWarpsN) * 16 * kRT), d0((warp / kWarpsN) * kDAcc) {}
  static __device__ __forceinline__ int warp_d(int warp) { return warp / kWarpsN; }
};

// The producer: K and V of the CTA's keys once, then per work item (query head, Q tile) a
// stage of Q, dO, lse * log2e and D.
template <class Cfg, class Layout>
struct DkdvProducer {
  __device__ __forceinline__ static void load_kv(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                 const Layout& l, int h_kv, int n0, int rows_k, int tid) {
    using KV = typename Layout::KV;
    load_tile<KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(l.s_k, off.k(h_kv, n0), p.k_stride.row, rows_k, tid);
    load_tile<KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(l.s_v, off.v(h_kv, n0), p.v_stride.row, rows_k, tid);
    cp_async_commit();
  }

  // Rows with no visible key (lse = -inf) and rows past seqlen_q get lse * log2e = +inf: P = 0.
  __device__ __forceinline__ static void load_stage(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                    const Layout& l, int h, int m0, int stage, int tid) {
    using Q = typename Layout::Q;
    const u32 dst = l.s_q(stage);
    load_tile<Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(dst, off.q(h, m0), p.q_stride.row, off.seqlen_q() - m0, tid);
    load_tile<Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(dst + Q::kBytes, off.dout(h, m0), p.dout_stride.row,
                                                               off.seqlen_q() - m0, tid);
    const i64 row_base = off.accum_row(h) + m0;
    for (int i = tid; i < Cfg::kBlockM; i += Cfg::kThreads) {
      const bool valid = m0 + i < off.seqlen_q();
      const float lse = valid ? p.lse[off.lse_row(h) + m0 + i] : neg_inf();
      st_shared_f32(dst + 2 * Q::kBytes + 4 * i, lse == neg_inf() ? pos_inf() : lse * kLog2e);
      st_shared_f32(dst + 2 * Q::kBytes + 4 * (Cfg::kBlockM + i), valid ? p.dsum[row_base + i] : 0.0f);
    }
  }
};

}  // namespace flash
