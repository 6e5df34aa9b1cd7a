// Score-level ops: which (query, key) pairs are visible (bounds, causal, sliding
// window; bottom-right aligned), tile ranges that skip invisible tiles, soft-capping,
// and the online softmax ledger (row max m, row sum l) of the forward pass.
namespace flash {

constexpr bool kLocal = kCausal || kWindow;  // visibility depends on (query, key) position

// Query i sees key j iff j < seqlen_k and i + off - left <= j <= i + off + right,
// with off = seqlen_k - seqlen_q and a negative left/right meaning unbounded.
// Causal arrives as right = 0 (the host folds it into the window).
struct Visibility {
  int seqlen_q, seqlen_k, off, left, right;

  __device__ __forceinline__ explicit Visibility(const FlashAttentionParams& p)
      : seqlen_q(p.seqlen_q), seqlen_k(p.seqlen_k), off(p.seqlen_k - p.seqlen_q), left(p.window_left),
        right(p.window_right) {}

  __device__ __forceinline__ bool sees(int i, int j) const {
    bool ok = j < seqlen_k;
    if constexpr (kLocal) {
      if (left >= 0) ok = ok && j >= i + off - left;
      if (right >= 0) ok = ok && j <= i + off + right;
    }
    return ok;
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

// Sets invisible scores to -inf. C-fragment rows start at row0, columns at col0
// (absolute positions); kRowsAreQueries says whether rows are queries (fwd, dq)
// or keys (dkdv, which computes S transposed).
template <bool kRowsAreQueries, int kRT, int kNT>
__device__ __forceinline__ void mask_scores(float (&s)[kRT][kNT][4], const Visibility& vis, int row0, int col0, int lane) {
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

// s <- cap * tanh(s * scale / cap). `pre` = scale / cap.
template <int kRT, int kNT>
__device__ __forceinline__ void softcap_scores(float (&s)[kRT][kNT][4], float pre, float cap) {
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = cap * tanh_accurate(s[mt][nt][e] * pre);
}

// The backward's softcap: s <- cap * tanh(s * pre) as above, and slope <- 1 - tanh^2,
// the derivative of the capped score that dS is multiplied by.
template <int kRT, int kNT>
__device__ __forceinline__ void softcap_scores_and_slope(float (&s)[kRT][kNT][4], float (&slope)[kRT][kNT][4],
                                                         float pre, float cap) {
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float th = tanh_accurate(s[mt][nt][e] * pre);
        s[mt][nt][e] = cap * th;
        slope[mt][nt][e] = 1.0f - th * th;
      }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The forward ledger of one thread: rows (mt, half) with half 0 = row g, 1 = row g+8.
// l holds this thread's partial sum (its columns); finish() reduces it across the quad.
template <int kRT>
struct SoftmaxLedger {
  float m[kRT][2];
  float l[kRT][2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m[mt][h] = neg_inf();
        l[mt][h] = 0.0f;
      }
  }

  // Folds a tile of scores in: new max, rescale l and o by exp2((m_old - m_new) * scale_log2),
  // and turns s into p = exp2(s * scale_log2 - m_new * scale_log2).
  template <int kNT, int kDT>
  __device__ __forceinline__ void update(float (&s)[kRT][kNT][4], float (&o)[kRT][kDT][4], float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = m[mt][h];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        mx = quad_max(mx);
        // A row that has seen only masked keys keeps m = -inf: use 0 so that -inf - -inf never happens.
        const bool empty = mx == neg_inf();
        const float m_scaled = empty ? 0.0f : mx * scale_log2;
        const float corr = empty ? 1.0f : exp2_fast((m[mt][h] - mx) * scale_log2);
        m[mt][h] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[mt][nt][e] = exp2_fast(fmaf(s[mt][nt][e], scale_log2, -m_scaled));
            sum += s[mt][nt][e];
          }
        l[mt][h] = l[mt][h] * corr + sum;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          o[mt][dt][2 * h] *= corr;
          o[mt][dt][2 * h + 1] *= corr;
        }
      }
  }

  // Reduces l over the quad, scales o by 1/l (0 for empty rows) and returns
  // lse (natural log; -inf for empty rows) in lse[mt][h].
  template <int kDT>
  __device__ __forceinline__ void finish(float (&o)[kRT][kDT][4], float scale_log2, float (&lse)[kRT][2]) {
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sum = quad_sum(l[mt][h]);
        const bool empty = sum == 0.0f;
        const float inv = empty ? 0.0f : 1.0f / sum;
        lse[mt][h] = empty ? neg_inf() : (m[mt][h] * scale_log2 + log2_fast(sum)) * kLn2;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          o[mt][dt][2 * h] *= inv;
          o[mt][dt][2 * h + 1] *= inv;
        }
      }
  }
};

}  // namespace flash
