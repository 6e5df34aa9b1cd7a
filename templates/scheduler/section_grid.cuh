// The block-major single-tile grid for tiles of unequal work: gridDim = (slices per section,
// blocks, sections), where a slice is one (head, batch) pair. The hardware starts CTAs x
// fastest, so within a section every slice starts its block 0 before any slice starts its
// block 1: under a causal mask the dK/dV kernel's heaviest key blocks (block 0 sees every
// query) all run first, while a section's slices' Q, dO and dQ rows fit in L2 (FA3's LPT
// order; the launch plan sizes the sections, one slice per section being the plain grid's
// order). The tile is a permutation of blockIdx plus one division by a parameter, which a
// 24-register producer re-derives where it needs it: decoding a launch rank into three values
// instead (SingleTileScheduler::first(p)) made the dK/dV kernels spill.
#pragma once

#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"

namespace flash {

struct SectionGridScheduler {
  // The dK/dV grid's slices: key/value heads x batch.
  static __device__ __forceinline__ WorkTile first(const FlashAttentionParams& p) {
    const int slice = static_cast<int>(blockIdx.z * gridDim.x + blockIdx.x);
    return {static_cast<int>(blockIdx.y), slice % p.heads_kv, slice / p.heads_kv, slice < p.heads_kv * p.batch};
  }
};

}  // namespace flash
