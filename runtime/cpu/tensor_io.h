// Moving rows of a strided tensor in any dtype to and from contiguous float/double
// buffers: the only place the CPU backend touches caller memory.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::cpu {

// Rows [row_begin, row_begin + rows) of head h in batch b -> dst (rows x head_dim, contiguous).
template <class Real>
void load_rows(const Tensor& t, std::int64_t b, std::int64_t h, std::int64_t row_begin, std::int64_t rows,
               std::int64_t head_dim, Real* dst) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t d = 0; d < head_dim; ++d)
      dst[r * head_dim + d] = load_float(t.data, t.dtype, element_index(t, b, row_begin + r, h, d));
}

// src (rows x head_dim, contiguous) -> rows [row_begin, row_begin + rows) of head h in batch b,
// rounded to the tensor's dtype. Stores go through float: fp32 is the widest output dtype.
template <class Real>
void store_rows(const Tensor& t, std::int64_t b, std::int64_t h, std::int64_t row_begin, std::int64_t rows,
                std::int64_t head_dim, const Real* src) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t d = 0; d < head_dim; ++d)
      store_float(t.data, t.dtype, element_index(t, b, row_begin + r, h, d), static_cast<float>(src[r * head_dim + d]));
}

// Rows [0, rows) of every head of batch b set to 0.
inline void store_zero_rows(const Tensor& t, std::int64_t b, std::int64_t rows, std::int64_t heads,
                            std::int64_t head_dim) {
  const std::vector<float> zeros(static_cast<std::size_t>(rows * head_dim), 0.0f);
  for (std::int64_t h = 0; h < heads; ++h) store_rows(t, b, h, 0, rows, head_dim, zeros.data());
}

// The forward of batch b when its sequence has no key: every query row is fully masked, o = 0
// and lse = -inf (when wanted), as DESIGN.md has it for a row that sees no key.
inline void store_without_keys(const ForwardArgs& args, const Problem& p, std::int64_t b) {
  store_zero_rows(args.o, b, p.seqlen_q, p.heads_q, p.head_dim);
  if (args.lse.data == nullptr) return;
  for (std::int64_t h = 0; h < p.heads_q; ++h)
    for (std::int64_t i = 0; i < p.seqlen_q; ++i)
      static_cast<float*>(args.lse.data)[lse_index(args.lse, b, h, i)] = -std::numeric_limits<float>::infinity();
}

// A whole (batch, seqlen, heads, head_dim) tensor as contiguous doubles.
inline std::vector<double> gather_f64(const Tensor& t, std::int64_t batch, std::int64_t seqlen, std::int64_t heads,
                                      std::int64_t head_dim) {
  std::vector<double> out(static_cast<std::size_t>(batch * seqlen * heads * head_dim));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < seqlen; ++s)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < head_dim; ++d)
          out[static_cast<std::size_t>(((b * seqlen + s) * heads + h) * head_dim + d)] =
              load_float(t.data, t.dtype, element_index(t, b, s, h, d));
  return out;
}

inline void scatter_f64(const std::vector<double>& src, const Tensor& t, std::int64_t batch, std::int64_t seqlen,
                        std::int64_t heads, std::int64_t head_dim) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < seqlen; ++s)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < head_dim; ++d)
          store_float(t.data, t.dtype, element_index(t, b, s, h, d),
                      static_cast<float>(src[static_cast<std::size_t>(((b * seqlen + s) * heads + h) * head_dim + d)]));
}

}  // namespace flashgen::cpu
