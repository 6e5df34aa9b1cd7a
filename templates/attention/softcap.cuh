// Soft-capped logits, s <- cap * tanh(s * scale / cap), and the derivative the
// backward multiplies dS by.
#pragma once

#include "arch/numeric.cuh"

namespace flash {

// tanh accurate to a few fp32 ulps in absolute terms (tanh.approx is ~2^-11 relative,
// too coarse once multiplied by the cap): tanh(x) = 1 - 2 / (e^{2x} + 1).
__device__ __forceinline__ float tanh_accurate(float x) {
  const float e = exp2_fast(2.0f * kLog2e * x);
  return 1.0f - 2.0f / (e + 1.0f);
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

}  // namespace flash
