// Merging attention results computed over disjoint key sets (the warps of a decode CTA,
// the splits of a split-KV forward): part i has its output normalised by its own row sum
// and its lse_i. The merged lse is log(sum_i exp(lse_i)) and part i's weight exp(lse_i - lse).
// A part that saw no key has lse -inf and weight 0; a NaN lse makes the merge NaN.
#pragma once

#include "arch/numeric.cuh"

namespace flash {

struct LseMerge {
  float m = neg_inf();  // the largest lse so far
  float s = 0.0f;       // sum of exp(lse_i - m)

  __device__ __forceinline__ void add(float lse) {
    if (lse == neg_inf()) return;
    if (lse > m) {
      s = s * exp2_fast((m - lse) * kLog2e) + 1.0f;
      m = lse;
    } else {
      s += exp2_fast((lse - m) * kLog2e);  // NaN here (lse or m) stays NaN
    }
  }
  // Folds in another merge's parts (a tree of merges: lanes of a warp).
  __device__ __forceinline__ void merge(const LseMerge& o) {
    if (o.m == neg_inf()) {
      s = o.s != o.s ? o.s : s;  // a NaN sum (a NaN part) stays NaN
      return;
    }
    if (o.m > m) {
      s = s * exp2_fast((m - o.m) * kLog2e) + o.s;
      m = o.m;
    } else {
      s += o.s * exp2_fast((o.m - m) * kLog2e);
    }
  }
  // The merge of the lane `lane ^ mask` of this warp (every lane calls it).
  __device__ __forceinline__ LseMerge shuffled_xor(int mask) const {
    LseMerge o;
    o.m = __shfl_xor_sync(0xffffffffu, m, mask);
    o.s = __shfl_xor_sync(0xffffffffu, s, mask);
    return o;
  }
  // log(sum_i exp(lse_i)); -inf when no part saw a key.
  __device__ __forceinline__ float lse() const { return s == 0.0f ? neg_inf() : m + log2_fast(s) * kLn2; }
  // The weight of the part with lse_i in the merge whose lse is `merged`.
  static __device__ __forceinline__ float weight(float lse_i, float merged) {
    return lse_i == neg_inf() ? 0.0f : exp2_fast((lse_i - merged) * kLog2e);
  }
};

}  // namespace flash
