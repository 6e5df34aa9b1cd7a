// The CPU backend's forward over a KV cache (ForwardArgs::block_table, ::seqused_k): each
// sequence's keys are gathered into a dense copy (1, keys, heads_kv, head_dim) and run
// through tiled_forward as a batch of one, so that the reference is the dense forward's
// and shares none of the GPU's page arithmetic.
#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::cpu {
namespace {

std::int32_t index_at(const Tensor& t, std::int64_t i, std::int64_t j = 0) {
  return static_cast<const std::int32_t*>(t.data)[i * t.stride[0] + j * t.stride[1]];
}

// Keys of sequence b; every page they touch is checked against the cache.
std::int64_t sequence_keys(const ForwardArgs& args, const Problem& p, std::int64_t b) {
  std::int64_t keys = p.seqlen_k;
  if (p.has_seqused_k) {
    keys = index_at(args.seqused_k, b);
    if (keys < 0 || keys > p.seqlen_k)
      throw Error(Status::invalid_argument, fmt::format("seqused_k: element [{}] is {}, expected 0..{} (seqlen_k{})", b,
                                                        keys, p.seqlen_k, p.paged ? " of the block table" : ""));
  }
  if (p.paged)
    for (std::int64_t slot = 0; slot * p.page_size < keys; ++slot) {
      const std::int32_t page = index_at(args.block_table, b, slot);
      if (page < 0 || page >= p.num_pages)
        throw Error(Status::invalid_argument,
                    fmt::format("block_table: element [{}, {}] is {}, expected a page of k in 0..{} (it holds keys of "
                                "sequence {})",
                                b, slot, page, p.num_pages - 1, b));
    }
  return keys;
}

// Address of key `key` of KV head h of sequence b in k or v (dense or paged).
const std::byte* key_row(const Tensor& t, const ForwardArgs& args, const Problem& p, std::int64_t b, std::int64_t key,
                         std::int64_t h) {
  std::int64_t index = 0;
  if (p.paged) {
    const std::int64_t page = index_at(args.block_table, b, key / p.page_size);
    index = page * t.stride[0] + (key % p.page_size) * t.stride[1] + h * t.stride[2];
  } else {
    index = b * t.stride[0] + key * t.stride[1] + h * t.stride[2];
  }
  return static_cast<const std::byte*>(t.data) + index * static_cast<std::int64_t>(size_of(t.dtype));
}

Tensor batch_view(const Tensor& t, std::int64_t b, std::size_t elem) {
  Tensor out = t;
  out.data = static_cast<std::byte*>(t.data) + b * t.stride[0] * static_cast<std::int64_t>(elem);
  out.shape[0] = 1;
  return out;
}

}  // namespace

void kv_cache_forward(const ForwardArgs& args, const Problem& p, int threads) {
  // Every index is checked before any output is written.
  std::vector<std::int64_t> keys(static_cast<std::size_t>(p.batch));
  for (std::int64_t b = 0; b < p.batch; ++b) keys[b] = sequence_keys(args, p, b);

  const std::size_t elem = size_of(p.dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(p.head_dim) * elem;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Tensor o = batch_view(args.o, b, elem);
    if (keys[b] == 0) {  // no key: o = 0, lse = -inf (a fully masked row)
      for (std::int64_t s = 0; s < p.seqlen_q; ++s)
        for (std::int64_t h = 0; h < p.heads_q; ++h)
          for (std::int64_t d = 0; d < p.head_dim; ++d) store_float(o.data, p.dtype, element_index(o, 0, s, h, d), 0.0f);
      if (p.has_lse) {
        const Tensor lse = batch_view(args.lse, b, sizeof(float));
        for (std::int64_t h = 0; h < p.heads_q; ++h)
          for (std::int64_t i = 0; i < p.seqlen_q; ++i)
            static_cast<float*>(lse.data)[lse_index(lse, 0, h, i)] = -std::numeric_limits<float>::infinity();
      }
      continue;
    }
    // The sequence's keys, dense: (1, keys, heads_kv, head_dim).
    const std::array<std::int64_t, 4> shape{1, keys[b], p.heads_kv, p.head_dim};
    std::vector<std::byte> k(static_cast<std::size_t>(keys[b] * p.heads_kv) * row_bytes);
    std::vector<std::byte> v(k.size());
    for (std::int64_t j = 0; j < keys[b]; ++j)
      for (std::int64_t h = 0; h < p.heads_kv; ++h) {
        const std::size_t at = static_cast<std::size_t>(j * p.heads_kv + h) * row_bytes;
        std::memcpy(k.data() + at, key_row(args.k, args, p, b, j, h), row_bytes);
        std::memcpy(v.data() + at, key_row(args.v, args, p, b, j, h), row_bytes);
      }
    ForwardArgs one;
    one.q = batch_view(args.q, b, elem);
    one.k = Tensor::contiguous(k.data(), p.dtype, shape);
    one.v = Tensor::contiguous(v.data(), p.dtype, shape);
    one.o = o;
    if (p.has_lse) one.lse = batch_view(args.lse, b, sizeof(float));
    one.options = args.options;
    Problem sequence = p;
    sequence.batch = 1;
    sequence.seqlen_k = keys[b];
    sequence.paged = sequence.has_seqused_k = false;
    sequence.num_pages = sequence.page_size = sequence.max_pages_per_seq = 0;
    tiled_forward(one, sequence, threads);
  }
}

}  // namespace flashgen::cpu
