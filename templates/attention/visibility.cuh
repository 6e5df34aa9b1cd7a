// Which (query, key) pairs are visible (bounds, causal, sliding window; bottom-right
// aligned), the tile ranges that skip invisible tiles, and the mask of boundary tiles.
#pragma once

#include "arch/ptx.cuh"

namespace flash {

// Query i sees key j iff j < seqlen_k and i + off - left <= j <= i + off + right,
// with off = seqlen_k - seqlen_q and a negative left/right meaning unbounded.
// Causal arrives as right = 0 (the host folds it into the window).
// kLocal: causal or a window is compiled in (else only the key bound is checked).
template <bool kLocal>
struct Visibility {
  int seqlen_q, seqlen_k, off, left, right;

  __device__ __forceinline__ Visibility(int seqlen_q_, int seqlen_k_, int window_left, int window_right)
      : seqlen_q(seqlen_q_), seqlen_k(seqlen_k_), off(seqlen_k_ - seqlen_q_), left(window_left),
        right(window_right) {}

  __device__ __forceinline__ bool sees(int i, int j) const {
    bool ok = j < seqlen_k;
    if constexpr (kLocal) {
      if (left >= 0) ok = ok && j >= i + off - left;
      if (right >= 0) ok = ok && j <= i + off + right;
    }
    return ok;
  }

  // Keys [lo, hi) that query i sees (lo >= 0; empty when hi <= lo).
  __device__ __forceinline__ void keys_of(int i, int& lo, int& hi) const {
    lo = 0;
    hi = seqlen_k;
    if constexpr (kLocal) {
      if (left >= 0) lo = max(lo, i + off - left);
      if (right >= 0) hi = min(hi, i + off + right + 1);
    }
  }

  // Keys [begin, end) seen by any query of [q0, q1).
  __device__ __forceinline__ void key_range(int q0, int q1, int& begin, int& end) const {
    begin = 0;
    end = seqlen_k;
    if constexpr (kLocal) {
      if (left >= 0) begin = max(begin, q0 + off - left);
      if (right >= 0) end = min(end, q1 - 1 + off + right + 1);
    }
  }

  // Queries [begin, end) that see any key of [k0, k1).
  __device__ __forceinline__ void query_range(int k0, int k1, int& begin, int& end) const {
    begin = 0;
    end = seqlen_q;
    if constexpr (kLocal) {
      if (right >= 0) begin = max(begin, k0 - off - right);
      if (left >= 0) end = min(end, k1 - 1 - off + left + 1);
    }
  }

  // True when every (query, key) of the tile is visible: no mask needed.
  __device__ __forceinline__ bool tile_visible(int q0, int q1, int k0, int k1) const {
    bool ok = k1 <= seqlen_k;
    if constexpr (kLocal) {
      if (left >= 0) ok = ok && k0 >= q1 - 1 + off - left;
      if (right >= 0) ok = ok && k1 - 1 <= q0 + off + right;
    }
    return ok;
  }
};

// Tile indices [begin, end) of size kTile covering [lo, hi); empty when hi <= lo.
template <int kTile>
__device__ __forceinline__ void tile_span(int lo, int hi, int& begin, int& end) {
  begin = max(lo, 0) / kTile;
  end = hi > lo ? (hi + kTile - 1) / kTile : begin;
}

// Sets invisible scores to -inf. pos[mt][h] is the absolute position of this thread's
// C-fragment row 16 mt + g + 8 h (g = lane / 4), columns start at col0; kRowsAreQueries says
// whether rows are queries (fwd, dq) or keys (dkdv, which computes S transposed).
template <bool kRowsAreQueries, class Vis, int kRT, int kNT>
__device__ __forceinline__ void mask_scores_at(float (&s)[kRT][kNT][4], const Vis& vis, const int (&pos)[kRT][2],
                                               int col0, int lane) {
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = pos[mt][e >> 1];
        const int c = col0 + 8 * nt + 2 * (lane & 3) + (e & 1);
        if (!(kRowsAreQueries ? vis.sees(r, c) : vis.sees(c, r))) s[mt][nt][e] = neg_inf();
      }
}

// mask_scores_at for rows at consecutive positions from row0. (Written out, not through
// mask_scores_at: that form changes the causal warp-specialised forward's code.)
template <bool kRowsAreQueries, class Vis, int kRT, int kNT>
__device__ __forceinline__ void mask_scores(float (&s)[kRT][kNT][4], const Vis& vis, int row0, int col0, int lane) {
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + 16 * mt + (lane >> 2) + 8 * (e >> 1);
        const int c = col0 + 8 * nt + 2 * (lane & 3) + (e & 1);
        if (!(kRowsAreQueries ? vis.sees(r, c) : vis.sees(c, r))) s[mt][nt][e] = neg_inf();
      }
}

// mask_scores for rows that are queries, through each row's visible key range: the bounds
// are computed once per row, relative to the thread's first column, so that every element
// compares a compile-time column against two registers. The warp-specialised forward's
// consumers are register-bound at d64 (three warpgroups at 160 registers): the per-element
// form kept the sequence's bounds and their predicates live there, and spilled once those
// bounds were per-sequence registers (packed sequences) rather than kernel parameters.
template <class Vis, int kRT, int kNT>
__device__ __forceinline__ void mask_query_rows(float (&s)[kRT][kNT][4], const Vis& vis, int row0, int col0, int lane) {
  const int c0 = col0 + 2 * (lane & 3);
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      int lo, hi;
      vis.keys_of(row0 + 16 * mt + (lane >> 2) + 8 * hh, lo, hi);
      lo -= c0;
      hi -= c0;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
          const int k = 8 * nt + (e & 1);
          if (k < lo || k >= hi) s[mt][nt][e] = neg_inf();
        }
    }
}

}  // namespace flash
