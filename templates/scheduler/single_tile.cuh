// Tile schedulers say which work tile (a block of query or key rows of one batch and head)
// a CTA computes. The single-tile scheduler: one tile per CTA, read off the grid
// (x: block, y: head, z: batch). Persistent and varlen schedulers have the same interface
// (first(), next(), valid()) and loop where this one runs once.
#pragma once

#include "params/attention_params.h"

namespace flash {

struct WorkTile {
  int block, head, batch;
  bool valid;
  int linear = 0;  // the tile's index in a persistent scheduler's walk
};

// kReverse: blocks in reverse order, so that the heaviest tiles of a causal mask (the last
// query blocks) start first. Given the parameter block, the CTAs take the tiles in
// p.tile_section's order (params/attention_params.h): longest-processing-time first across
// the slices of an L2-sized section, the order FlashAttention-3 schedules causal tiles in;
// without kSections first(p) is first() (a kernel whose registers cannot hold the decoded tile).
template <bool kReverse, bool kSections = true>
struct SingleTileScheduler {
  static __device__ __forceinline__ WorkTile first() {
    return tile(blockIdx.x, blockIdx.y, blockIdx.z);
  }
  static __device__ __forceinline__ WorkTile first(const FlashAttentionParams& p) {
    if (!kSections || p.tile_section <= 1) return first();
    // The CTA's launch rank (x fastest), cut in sections of blocks x section slices; in a
    // section, rank r is block r / slices of slice r % slices.
    const unsigned blocks = gridDim.x, heads = gridDim.y, slices = gridDim.y * gridDim.z;
    const unsigned rank = blockIdx.x + blocks * (blockIdx.y + heads * blockIdx.z);
    const unsigned section = static_cast<unsigned>(p.tile_section);
    const unsigned first_slice = rank / (blocks * section) * section;
    const unsigned in_section = min(section, slices - first_slice);
    const unsigned r = rank - first_slice * blocks;
    const unsigned slice = first_slice + r % in_section;
    return tile(r / in_section, slice % heads, slice / heads);
  }
  static __device__ __forceinline__ WorkTile next(const WorkTile& t) { return {t.block, t.head, t.batch, false}; }
  static __device__ __forceinline__ WorkTile next(const FlashAttentionParams&, const WorkTile& t) { return next(t); }

 private:
  static __device__ __forceinline__ WorkTile tile(unsigned block, unsigned head, unsigned batch) {
    return {kReverse ? static_cast<int>(gridDim.x - 1 - block) : static_cast<int>(block), static_cast<int>(head),
            static_cast<int>(batch), true};
  }
};

}  // namespace flash
