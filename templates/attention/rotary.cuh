// Rotary position embedding (RoPE) of one 8-column chunk of a row, FlashAttention's
// convention: the first rotary_dim columns of a row at position t rotate by the angles of
// row t of the cos and sin tables (rotary_dim / 2 values each), pairs of columns (2j, 2j + 1)
// when interleaved (GPT-J), else (j, j + rotary_dim / 2) (GPT-NeoX):
//   x' = x cos - y sin,  y' = x sin + y cos   for the pair (x, y) at angle j.
// Arithmetic is fp32; the caller rounds the result to the element type once.
#pragma once

#include "arch/types.cuh"

namespace flash {

template <class Element>
struct Rotary {
  // Interleaved: chunk c's four pairs (x[2t], x[2t + 1]) at angles 4c + t of row `cs`/`sn`.
  static __device__ __forceinline__ void rotate_pairs(float (&x)[8], const u16* cs, const u16* sn, int c) {
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float co = Element::to_float(cs[4 * c + t]), si = Element::to_float(sn[4 * c + t]);
      const float a = x[2 * t], b = x[2 * t + 1];
      x[2 * t] = a * co - b * si;
      x[2 * t + 1] = a * si + b * co;
    }
  }

  // Halves: chunk c of the first half (lo) with its partner chunk rotary_dim / 16 chunks on
  // (hi), columns 8c + t at angles 8c + t.
  static __device__ __forceinline__ void rotate_halves(float (&lo)[8], float (&hi)[8], const u16* cs, const u16* sn,
                                                       int c) {
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float co = Element::to_float(cs[8 * c + t]), si = Element::to_float(sn[8 * c + t]);
      const float a = lo[t], b = hi[t];
      lo[t] = a * co - b * si;
      hi[t] = a * si + b * co;
    }
  }
};

}  // namespace flash
