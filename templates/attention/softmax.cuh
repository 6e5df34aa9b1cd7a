// The online softmax ledger of the forward pass: per query row the running max m and
// sum l of exponentials, folded in tile by tile; lse = m + log(l) at the end.
#pragma once

#include "arch/numeric.cuh"

namespace flash {

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

  // The max of `init` and this thread's columns of row half h, in four independent chains
  // (FA4's order on sm_90): one chain of 2 kNT dependent FMNMX held the softmax's longest
  // latency (Nsight Compute, d128 forward: 15 % of the warp samples, waiting on the previous
  // max). fmaxf drops NaN operands in any order, so the result is the chain's, bit for bit.
  template <int kNT>
  static __device__ __forceinline__ float row_max(const float (&s)[kNT][4], int h, float init) {
    constexpr int kChains = 2 * kNT < 4 ? 2 * kNT : 4;
    float acc[kChains];
#pragma unroll
    for (int i = 0; i < kChains; ++i) acc[i] = s[i >> 1][2 * h + (i & 1)];
#pragma unroll
    for (int i = kChains; i < 2 * kNT; ++i) acc[i % kChains] = fmaxf(acc[i % kChains], s[i >> 1][2 * h + (i & 1)]);
    if constexpr (kChains == 4) return fmaxf(init, fmaxf(fmaxf(acc[0], acc[1]), fmaxf(acc[2], acc[3])));
    return fmaxf(init, fmaxf(acc[0], acc[1]));
  }

  // Folds a tile of scores in: new max, l rescaled by corr = exp2((m_old - m_new) * scale_log2)
  // plus the new row sums, and s turned into p = exp2(s * scale_log2 - m_new * scale_log2).
  // O is left alone (a P.V product may still be reading it): rescale() applies corr.
  template <int kNT>
  __device__ __forceinline__ void fold(float (&s)[kRT][kNT][4], float scale_log2, float (&corr)[kRT][2]) {
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float mx = quad_max(row_max(s[mt], h, m[mt][h]));
        // A row that has seen only masked keys keeps m = -inf: use 0 so that -inf - -inf never happens.
        const bool empty = mx == neg_inf();
        // Lazy (FA4's rule): the old max stays while the new one exceeds it by at most 2^8 in p
        // (bf16/fp16 P and the fp32 sum and O hold that; a fresh row's -inf never stays: inf > 8).
        // The sum, O and lse all use the max kept, so it cancels; O is rescaled only when a row
        // of the warp moves (rescale()): +4 % decode 8 x 16, +5 % d128 forward on the H100
        // (docs/perf-notes.md, "Session 25").
        const bool keep = (mx - m[mt][h]) * scale_log2 <= 8.0f;
        const float m_new = keep ? m[mt][h] : mx;
        const float m_scaled = empty ? 0.0f : m_new * scale_log2;
        corr[mt][h] = empty || keep ? 1.0f : exp2_fast((m[mt][h] - m_new) * scale_log2);
        m[mt][h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[mt][nt][e] = exp2_fast(fmaf(s[mt][nt][e], scale_log2, -m_scaled));
            sum += s[mt][nt][e];
          }
        l[mt][h] = l[mt][h] * corr[mt][h] + sum;
      }
  }

  template <int kDT>
  static __device__ __forceinline__ void rescale(float (&o)[kRT][kDT][4], const float (&corr)[kRT][2]) {
    bool any = false;
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt) any |= corr[mt][0] != 1.0f || corr[mt][1] != 1.0f;
    if (!__any_sync(0xffffffffu, any)) return;  // the warp's rows all kept their max
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][dt][e] *= corr[mt][e >> 1];
  }

  // fold() and rescale() in one: for a consumer whose P.V products have retired.
  template <int kNT, int kDT>
  __device__ __forceinline__ void update(float (&s)[kRT][kNT][4], float (&o)[kRT][kDT][4], float scale_log2) {
    float corr[kRT][2];
    fold(s, scale_log2, corr);
    rescale(o, corr);
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
