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
// query blocks) start first.
template <bool kReverse>
struct SingleTileScheduler {
  static __device__ __forceinline__ WorkTile first() {
    return {kReverse ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x),
            static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z), true};
  }
  static __device__ __forceinline__ WorkTile next(const WorkTile& t) { return {t.block, t.head, t.batch, false}; }
  // The persistent schedulers' interface (they read the problem's tile counts).
  static __device__ __forceinline__ WorkTile first(const FlashAttentionParams&) { return first(); }
  static __device__ __forceinline__ WorkTile next(const FlashAttentionParams&, const WorkTile& t) { return next(t); }
};

}  // namespace flash
