// The static persistent scheduler: gridDim.x CTAs (the host launches at most one per SM)
// walk the work tiles in the single-tile grid's order (query block fastest, then head, then
// batch), CTA i taking tiles i, i + gridDim.x, ... Tiles of equal cost (no mask) spread
// evenly, and the CTAs running at once share the K/V of a few heads in L2 as the single-tile
// grid's do. Every role of a CTA walks the same sequence, so producer and consumers agree on
// each tile without talking.
#pragma once

#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"

namespace flash {

template <int kBlockM>
struct StaticPersistentScheduler {
  static __device__ __forceinline__ WorkTile first(const FlashAttentionParams& p) {
    return at(p, static_cast<int>(blockIdx.x));
  }
  static __device__ __forceinline__ WorkTile next(const FlashAttentionParams& p, const WorkTile& t) {
    return at(p, t.linear + static_cast<int>(gridDim.x));
  }

 private:
  static __device__ __forceinline__ WorkTile at(const FlashAttentionParams& p, int linear) {
    const int m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
    if (linear >= m_blocks * p.heads_q * p.batch) return {0, 0, 0, false, linear};
    const int rest = linear / m_blocks;
    return {linear - rest * m_blocks, rest % p.heads_q, rest / p.heads_q, true, linear};
  }
};

}  // namespace flash
