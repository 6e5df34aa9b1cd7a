// The static persistent scheduler: gridDim.x CTAs (the host launches at most one per SM) walk
// the work tiles in rounds of gridDim.x tiles, CTA i taking the i-th tile of each round. Every
// role of a CTA walks the same sequence, so producer and consumers agree on each tile without
// talking.
//
// Unmasked (kLongestFirst false): the single-tile grid's order (query block fastest, then
// head, then batch). Tiles of equal cost spread evenly, and the CTAs running at once share the
// K/V of a few heads in L2 as the single-tile grid's do.
//
// Masked (kLongestFirst): the tiles' costs differ (a causal query tile sees the keys up to its
// own), so the walk goes longest first: every slice's last query block, then every slice's
// second last, and so on (FlashAttention-3's LPT order, over all slices), and the rounds go
// in a snake: CTA i takes the i-th tile of even rounds and the i-th from the end of odd ones.
// Along this order the costs only decrease, so a CTA that took one of the heaviest tiles of a
// round takes one of the lightest of the next, and every CTA's sum stays within one round's
// spread of the mean (d128 causal at 16k, 16 heads: < 1 %; the same order in strides gives
// CTA 0 the heaviest tile of every round, ~6 % over the mean). Not in the single-tile grid's
// L2 sections (p.tile_section): their costs rise again at each section's start, which the
// snake's pairs do not cancel (+30 % for the busiest CTA at 16k). L2 holds without them: the
// CTAs of one slice run neighbouring blocks at once and each walks its keys from its diagonal
// down, so they read the same K/V tiles within a tile of each other. Static: no tile counter in
// memory (graph-safe, nothing to reset), and the walk is the same every launch.
#pragma once

#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"

namespace flash {

template <int kBlockM, bool kLongestFirst = false>
struct StaticPersistentScheduler {
  static __device__ __forceinline__ WorkTile first(const FlashAttentionParams& p) {
    if constexpr (kLongestFirst) return longest_first(p, 0);
    return in_order(p, static_cast<int>(blockIdx.x));
  }
  static __device__ __forceinline__ WorkTile next(const FlashAttentionParams& p, const WorkTile& t) {
    if constexpr (kLongestFirst) return longest_first(p, t.linear + 1);
    return in_order(p, t.linear + static_cast<int>(gridDim.x));
  }

 private:
  // Unmasked: the tile of rank `linear` (WorkTile::linear) in the grid's order.
  static __device__ __forceinline__ WorkTile in_order(const FlashAttentionParams& p, int linear) {
    const int m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
    if (linear >= m_blocks * p.heads_q * p.batch) return {0, 0, 0, false, linear};
    const int rest = linear / m_blocks;
    return {linear - rest * m_blocks, rest % p.heads_q, rest / p.heads_q, true, linear};
  }

  // Masked: the CTA's tile of round `round` (WorkTile::linear) of the longest-first walk.
  static __device__ __forceinline__ WorkTile longest_first(const FlashAttentionParams& p, int round) {
    const unsigned ctas = gridDim.x, cta = blockIdx.x;
    const unsigned blocks = static_cast<unsigned>((p.seqlen_q + kBlockM - 1) / kBlockM);
    const unsigned heads = static_cast<unsigned>(p.heads_q);
    const unsigned slices = heads * static_cast<unsigned>(p.batch);
    const unsigned rank = static_cast<unsigned>(round) * ctas + (round & 1 ? ctas - 1 - cta : cta);
    if (rank >= blocks * slices) return {0, 0, 0, false, round};
    const unsigned slice = rank % slices;
    return {static_cast<int>(blocks - 1 - rank / slices), static_cast<int>(slice % heads),
            static_cast<int>(slice / heads), true, round};
  }
};

}  // namespace flash
