// GQA packing of a decode tile: its query rows are the (position, head) pairs of the
// `group` query heads that share one KV head, row r = position * group + head offset. A
// decode step has few positions per sequence; packing the group fills the tile's rows, and
// every K/V tile is read once for all the heads that use it.
#pragma once

namespace flash {

struct PackedRows {
  int group;  // query heads per KV head
  int head0;  // the first query head of the tile's KV head

  __device__ __forceinline__ int position(int r) const { return r / group; }
  __device__ __forceinline__ int head(int r) const { return head0 + r % group; }
};

}  // namespace flash
