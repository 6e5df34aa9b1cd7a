// The split-KV scheduler of the decode forward: one CTA per (query tile, key split, KV head,
// batch), read off the grid (x: split * m_blocks + query tile, y: KV head, z: batch), so that
// the CTAs of one query tile's splits are far apart in launch order and read different keys.
#pragma once

#include "params/attention_params.h"

namespace flash {

struct SplitKvTile {
  int m_block, split, head_kv, batch;
  bool valid;
};

struct SplitKvScheduler {
  static __device__ __forceinline__ SplitKvTile first(const FlashAttentionParams& p) {
    const int m_blocks = static_cast<int>(gridDim.x) / p.num_splits;
    const int x = static_cast<int>(blockIdx.x);
    return {x % m_blocks, x / m_blocks, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z), true};
  }
  static __device__ __forceinline__ SplitKvTile next(const SplitKvTile& t) {
    return {t.m_block, t.split, t.head_kv, t.batch, false};
  }
};

}  // namespace flash
