// The CPU backend's forward over a KV cache (ForwardArgs::block_table, ::seqused_k): each
// sequence's keys are gathered (tensor_io.h) into a dense fp32 copy and run
// through tiled_forward as a batch of one, so that the reference is the dense forward's
// and shares none of the GPU's page arithmetic. Packed queries (p.varlen) are viewed per
// sequence as a dense batch of one (packed_rows.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/packed_rows.h"
#include "runtime/cpu/tensor_io.h"

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

// Where key `key` of sequence b lies in k and v: (index of dimension 0, row), the page and
// its row for a paged cache.
std::array<std::int64_t, 2> key_location(const ForwardArgs& args, const Problem& p, std::int64_t b, std::int64_t key) {
  if (!p.paged) return {b, key};
  return {index_at(args.block_table, b, key / p.page_size), key % p.page_size};
}

Tensor batch_view(const Tensor& t, std::int64_t b) {
  Tensor out = t;
  out.data = static_cast<std::byte*>(t.data) + b * t.stride[0] * static_cast<std::int64_t>(size_of(t.dtype));
  out.shape[0] = 1;
  return out;
}

}  // namespace

void kv_cache_forward(const ForwardArgs& args, const Problem& p, int threads) {
  // Every index is checked before any output is written.
  std::vector<std::int64_t> keys(static_cast<std::size_t>(p.batch));
  for (std::int64_t b = 0; b < p.batch; ++b) keys[b] = sequence_keys(args, p, b);

  const std::int64_t d = p.head_dim;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    // Sequence b's queries, outputs and lse as a batch of one.
    ForwardArgs one;
    Problem sequence = p;
    if (p.varlen) {
      const PackedRange rows = packed_range(args.varlen.cu_seqlens_q, b);
      if (rows.rows == 0) continue;
      one.q = rows_view(args.q, rows);
      one.o = rows_view(args.o, rows);
      one.lse = lse_view(args.lse, rows);
      sequence.seqlen_q = rows.rows;
    } else {
      one.q = batch_view(args.q, b);
      one.o = batch_view(args.o, b);
      if (p.has_lse) one.lse = batch_view(args.lse, b);
    }
    one.options = args.options;
    sequence.batch = 1;
    sequence.varlen = false;
    sequence.total_q = 0;
    const std::int64_t n = keys[b];
    if (n == 0) {
      store_without_keys(one, sequence, 0);
      continue;
    }
    // The sequence's keys as fp32 (exact in every input dtype), head-major: (1, n, heads_kv,
    // head_dim) with strides (., head_dim, n * head_dim, 1). A page's rows are one run.
    std::vector<float> k(static_cast<std::size_t>(p.heads_kv * n * d)), v(k.size());
    for (std::int64_t h = 0; h < p.heads_kv; ++h)
      for (std::int64_t j = 0; j < n;) {
        const auto [at, row] = key_location(args, p, b, j);
        const std::int64_t run = p.paged ? std::min(n - j, p.page_size - row) : n;
        load_rows(args.k, at, h, row, run, d, k.data() + (h * n + j) * d);
        load_rows(args.v, at, h, row, run, d, v.data() + (h * n + j) * d);
        j += run;
      }
    const auto dense = [&](std::vector<float>& x) {
      Tensor t = Tensor::contiguous(x.data(), DType::f32, {1, n, p.heads_kv, d});
      t.stride = {p.heads_kv * n * d, d, n * d, 1};
      return t;
    };
    one.k = dense(k);
    one.v = dense(v);
    sequence.seqlen_k = n;
    sequence.paged = sequence.has_seqused_k = false;
    sequence.num_pages = sequence.page_size = sequence.max_pages_per_seq = 0;
    tiled_forward(one, sequence, threads);
  }
}

}  // namespace flashgen::cpu
