// Views of packed variable-length rows (PackedSequences) as dense batches of one, for the
// CPU backend: sequence b's rows of a packed tensor viewed in place, so that the packed
// layouts' reference is the dense one and shares none of the GPU's offset arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

// Rows [begin, begin + rows) of sequence b of packed rows: cu[b] and cu[b + 1] - cu[b]
// (validate.cpp has checked the offsets on the CPU).
struct PackedRange {
  std::int64_t begin, rows;
};
inline PackedRange packed_range(const Tensor& cu, std::int64_t b) {
  const auto* c = static_cast<const std::int32_t*>(cu.data);
  const std::int64_t begin = c[b * cu.stride[0]];
  return {begin, c[(b + 1) * cu.stride[0]] - begin};
}

// Rows [begin, begin + rows) of a packed (total, heads, head_dim) tensor as a dense
// (1, rows, heads, head_dim) one; the batch stride of a batch of one is never used.
inline Tensor rows_view(const Tensor& t, PackedRange r) {
  Tensor out = t;
  out.data = static_cast<std::byte*>(t.data) + r.begin * t.stride[0] * static_cast<std::int64_t>(size_of(t.dtype));
  out.rank = 4;
  out.shape = {1, r.rows, t.shape[1], t.shape[2]};
  out.stride = {0, t.stride[0], t.stride[1], t.stride[2]};
  return out;
}

// Columns [begin, begin + rows) of the packed lse (heads_q, total_q) as a dense (1, heads_q, rows)
// one; a null lse (not wanted) stays null.
inline Tensor lse_view(const Tensor& lse, PackedRange r) {
  if (lse.data == nullptr) return lse;
  Tensor out = lse;
  out.data = static_cast<float*>(lse.data) + r.begin * lse.stride[1];
  out.rank = 3;
  out.shape = {1, lse.shape[0], r.rows, 0};
  out.stride = {0, lse.stride[0], lse.stride[1], 0};
  return out;
}

}  // namespace flashgen::cpu
