// The element-wise steps of the dK/dV mainloops on transposed scores (rows = this warp's
// keys, columns = the tile's queries) and the sm_90a products that make and consume them:
//   P^T = exp2(S^T * scale_log2 - lse * log2e), dS^T = P^T * (dP^T - D) (times the softcap slope).
#pragma once

#include "arch/ptx.cuh"
#include "arch/wgmma_sm90.cuh"
#include "attention/softcap.cuh"
#include "attention/visibility.cuh"
#include "params/attention_params.h"
#include "tile/warpgroup_mma.cuh"

namespace flash {

// The stage's lse * log2e or D of this thread's query column 8 nt + 2 (lane % 4) + e of
// fragment value e. On 64-query tiles one 8-byte load per column pair (asm loads are never
// merged: one per value, the e = 0 and e = 2 values twice, was 3 % of the d128 dK/dV kernel's
// instructions; the pairs took the backward up 0.4-2.8 %, docs/perf-notes.md); on 128-query
// tiles (d64) too, but for the deterministic kernel; there, and on d128's 80-query tiles, the
// pair's registers spill (4-64 bytes) and each value is its own load; so too in the
// warp-specialised kernel (12 warps) with softcap above d96, where the slope's 32 registers
// beside the pairs spilled 8 bytes.
template <class Cfg, int kMT>
struct RowStats {
  static constexpr bool kSoftcapWs = Cfg::kSoftcap && Cfg::kWarps == 12 && Cfg::kHeadDimPadded > 96;
  static constexpr bool kPairs = (kMT <= 8 && !kSoftcapWs) || (Cfg::kBlockM == 128 && !Cfg::kDeterministic);
  float2 pair;
  u32 s_stat;
  int col;
  __device__ __forceinline__ RowStats(u32 s, int nt, int lane) : s_stat(s), col(8 * nt + 2 * (lane & 3)) {
    if constexpr (kPairs) pair = ld_shared_v2_f32(s_stat + 4 * col);
  }
  __device__ __forceinline__ float operator[](int e) const {
    if constexpr (kPairs) return e & 1 ? pair.y : pair.x;
    else return ld_shared_f32(s_stat + 4 * (col + (e & 1)));
  }
};

// S^T -> P^T in place, with the softcap (its slope into dtanh) and, on tiles not wholly
// visible, the mask applied first. key_row0: the warp's first key; m0: the tile's first query.
template <class Cfg, class Vis, int kRT, int kMT>
__device__ __forceinline__ void probs_t(float (&s)[kRT][kMT][4], float (&dtanh)[kRT][kMT][4],
                                        const FlashAttentionParams& p, const Vis& vis, float softcap_pre, u32 s_lse,
                                        int n0, int key_row0, int m0, int lane) {
  if constexpr (Cfg::kSoftcap) softcap_scores_and_slope(s, dtanh, softcap_pre, p.softcap);
  if (!vis.tile_visible(m0, min(m0 + Cfg::kBlockM, p.seqlen_q), n0, n0 + Cfg::kBlockN))
    mask_scores<false>(s, vis, key_row0, m0, lane);
#pragma unroll
  for (int nt = 0; nt < kMT; ++nt) {
    const RowStats<Cfg, kMT> lse(s_lse, nt, lane);
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[mt][nt][e] = exp2_fast(fmaf(s[mt][nt][e], p.scale_log2, -lse[e]));
  }
}

// dp <- dS^T = P^T * (dP^T - D) (times the softcap slope).
template <class Cfg, int kRT, int kMT>
__device__ __forceinline__ void dscores_t(float (&dp)[kRT][kMT][4], const float (&pt)[kRT][kMT][4],
                                          const float (&dtanh)[kRT][kMT][4], u32 s_dsum, int lane) {
#pragma unroll
  for (int nt = 0; nt < kMT; ++nt) {
    const RowStats<Cfg, kMT> dsum(s_dsum, nt, lane);
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float ds = pt[mt][nt][e] * (dp[mt][nt][e] - dsum[e]);
        if constexpr (Cfg::kSoftcap) ds *= dtanh[mt][nt][e];
        dp[mt][nt][e] = ds;
      }
  }
}

// sm_90a products of one warpgroup (its 64 keys from key_row0): S^T = K.Q^T or dP^T =
// V.dO^T, both operands K-major. Issued, not fenced, committed or waited for.
template <class Cfg, class L, int kMT>
__device__ __forceinline__ void wgmma_scores_t(float (&acc)[kMT][4], u32 s_kv, int key_row0, u32 s_qo) {
#pragma unroll
  for (int k = 0; k < Cfg::kHeadDimPadded; k += 16)
    Wgmma<kMT * 8, Cfg::kIsBf16>::template ss<false, false>(acc, desc_k_major<typename L::KV>(s_kv, key_row0, k),
                                                            desc_k_major<typename L::Q>(s_qo, 0, k), k > 0);
}

// acc += X^T.B with X^T (64 keys x the tile's queries: P^T or dS^T) K-major in shared memory
// and B (dO or Q) MN-major, the kDT * 8 head-dim columns from col0 (a multiple of 64).
template <class Cfg, class L, int kDT>
__device__ __forceinline__ void wgmma_smem_t(float (&acc)[kDT][4], u32 s_x, u32 s_b, int col0) {
  using XT = typename L::DS;
  using QT = typename L::Q;
#pragma unroll
  for (int k = 0; k < Cfg::kBlockM; k += 16)
    Wgmma<kDT * 8, Cfg::kIsBf16>::template ss<false, true>(acc, desc_k_major<XT>(s_x, 0, k),
                                                           desc_mn_major<QT>(s_b + (col0 / 64) * QT::kBlockBytes, k), 1);
}

// acc += X^T.B with X^T (this warp's keys x the tile's queries) in registers and B (Q or
// dO, [query][d], the warpgroup's head-dim columns from col0, a multiple of 64) MN-major in
// shared memory. Issued, not waited for.
template <class Cfg, class L, int kMT, int kDT>
__device__ __forceinline__ void wgmma_regs_t(float (&acc)[kDT][4], const u32 (&a)[kMT / 2][4], u32 s_b, int col0) {
  using QT = typename L::Q;
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk)
    wgmma_rs_mn_major<Cfg::kIsBf16, QT>(acc, a[kk], s_b + (col0 / 64) * QT::kBlockBytes, 16 * kk);
}

// The shared-scores hand-over of one warpgroup's C fragments (dP^T) to the other's: thread i
// of the sender and thread i of the receiver (the same fragment positions) use slot i of a
// buffer of 128 threads x kMT 16-byte vectors (tid: the thread's index in the CTA), vector nt of every thread contiguous. (The
// all-threads kernel, at 255 registers, takes its slot before the products: later it spills.)
template <class Tid>
__device__ __forceinline__ u32 hand_over_slot(u32 s_buf, Tid tid) {
  return s_buf + 16 * (tid % 128);
}
template <int kMT>
__device__ __forceinline__ void hand_over_fragments(u32 slot, const float (&c)[kMT][4]) {
#pragma unroll
  for (int nt = 0; nt < kMT; ++nt)
    st_shared_v4(slot + 16 * 128 * nt, make_uint4(__float_as_uint(c[nt][0]), __float_as_uint(c[nt][1]),
                                                  __float_as_uint(c[nt][2]), __float_as_uint(c[nt][3])));
}
template <int kMT>
__device__ __forceinline__ void take_over_fragments(u32 slot, float (&c)[kMT][4]) {
#pragma unroll
  for (int nt = 0; nt < kMT; ++nt) {
    const uint4 v = ld_shared_v4(slot + 16 * 128 * nt);
    c[nt][0] = __uint_as_float(v.x), c[nt][1] = __uint_as_float(v.y);
    c[nt][2] = __uint_as_float(v.z), c[nt][3] = __uint_as_float(v.w);
  }
}

// Packed 16-bit fragments of this warp's keys x the tile's queries (c_to_a order) -> a [key][query]
// tile in shared memory (dS^T for the dQ product, P^T).
template <class XT, int kMT>
__device__ __forceinline__ void store_t(u32 s_x, const u32 (&a)[kMT / 2][4], int row0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      st_shared_u32(s_x + XT::elem(row0 + g + 8 * (r & 1), 16 * kk + 8 * (r >> 1) + 2 * tq), a[kk][r]);
}

// The same store by stmatrix, one per k-step (a[kk][r] is the 8x8 matrix of rows + 8 (r & 1),
// columns 16 kk + 8 (r >> 1)): a quarter of the instructions and of the addresses a thread
// keeps, which the warp-specialised kernel's 128-query tiles need to stay in 240 registers. (In
// the d256 all-threads kernel, at 255 registers, ptxas schedules it worse: 52 bytes of spill.)
template <class XT, int kMT>
__device__ __forceinline__ void store_t_x4(u32 s_x, const u32 (&a)[kMT / 2][4], int row0, int lane) {
  const int m = lane >> 3;  // the matrix this lane addresses a row of
  const int row = row0 + (lane & 7) + 8 * (m & 1);
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk) stmatrix_x4(s_x + XT::elem(row, 16 * kk + 8 * (m >> 1)), a[kk]);
}

// The same fragments stored transposed, one stmatrix.trans per k-step: a [query][key] tile (dS
// for the swapped dQ product of 80-query tiles, whose queries are no whole 64-column blocks of
// a [key][query] tile). Matrix m of k-step kk holds keys row0 + 8 (m & 1).., queries
// 16 kk + 8 (m >> 1)..; stored, its rows are those queries.
template <class X, int kMT>
__device__ __forceinline__ void store_x4_trans(u32 s_x, const u32 (&a)[kMT / 2][4], int row0, int lane) {
  const int m = lane >> 3;
  const int key = row0 + 8 * (m & 1);
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk) stmatrix_x4_trans(s_x + X::elem(16 * kk + 8 * (m >> 1) + (lane & 7), key), a[kk]);
}

}  // namespace flash
