// What the KV-cache tests (CPU backend, GPU kernels) share: a paged copy of a dense cache
// with its pages scattered in random order, and the oracle of a forward over a cache, one
// sequence at a time through the dense fp64 oracle (cpu::standard_forward_f64) with that
// sequence's key count. Nothing here shares code with the backends' page arithmetic.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/cpu/cpu_attention.h"
#include "runtime/validate.h"

namespace flashgen::test {

// Sequence b's keys [0, lengths[b]) of a dense (batch, capacity, heads_kv, head_dim) cache,
// paged: page_size rows per page, max_pages = ceil(capacity / page_size) table entries per
// sequence, the pages of all sequences shuffled among num_pages >= batch * max_pages. Rows no
// sequence owns hold `poison`; table entries past a sequence's keys are -7 (never read).
struct PagedCache {
  std::int64_t page_size = 1, max_pages = 0, num_pages = 0;
  std::vector<float> k, v;              // (num_pages, page_size, heads_kv, head_dim)
  std::vector<std::int32_t> table;      // (batch, max_pages)
};

inline PagedCache make_paged_cache(const std::vector<float>& k, const std::vector<float>& v, std::int64_t batch,
                                   std::int64_t capacity, std::int64_t row_elems, const std::vector<int>& lengths,
                                   std::int64_t page_size, std::mt19937& rng, float poison) {
  PagedCache c;
  c.page_size = page_size;
  c.max_pages = (capacity + page_size - 1) / page_size;
  c.num_pages = batch * c.max_pages + 3;  // spare pages nobody names
  std::vector<std::int32_t> order(static_cast<std::size_t>(c.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t page_elems = static_cast<std::size_t>(page_size * row_elems);
  c.k.assign(static_cast<std::size_t>(c.num_pages) * page_elems, poison);
  c.v = c.k;
  c.table.assign(static_cast<std::size_t>(batch * c.max_pages), -7);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t slot = 0; slot * page_size < lengths[b]; ++slot) {
      const std::int32_t page = order[static_cast<std::size_t>(b * c.max_pages + slot)];
      c.table[static_cast<std::size_t>(b * c.max_pages + slot)] = page;
      for (std::int64_t r = 0; r < page_size && slot * page_size + r < lengths[b]; ++r) {
        const std::size_t src = static_cast<std::size_t>((b * capacity + slot * page_size + r) * row_elems);
        const std::size_t dst = static_cast<std::size_t>(page) * page_elems + static_cast<std::size_t>(r * row_elems);
        std::copy_n(k.begin() + src, row_elems, c.k.begin() + dst);
        std::copy_n(v.begin() + src, row_elems, c.v.begin() + dst);
      }
    }
  return c;
}

// The oracle of a forward over a dense (batch, capacity, heads_kv, head_dim) cache whose
// sequence b has lengths[b] keys, its queries rows [cu_q[b], cu_q[b + 1]) of q (total_q,
// heads_q, head_dim); p is the dense problem (seqlen_k = capacity; batch and seqlen_q
// unused). o packed like q, lse (heads_q, total_q); a sequence without keys gets o = 0, lse
// = -inf; rows outside every sequence are NaN (nothing writes them).
inline cpu::Fp64Outputs packed_kv_cache_oracle(const Problem& p, const std::vector<double>& q,
                                               const std::vector<double>& k, const std::vector<double>& v,
                                               const std::vector<int>& cu_q, std::int64_t total_q,
                                               const std::vector<int>& lengths, int threads) {
  const std::int64_t q_row = p.heads_q * p.head_dim, row = p.heads_kv * p.head_dim;
  cpu::Fp64Outputs out;
  out.o.assign(static_cast<std::size_t>(total_q * q_row), std::numeric_limits<double>::quiet_NaN());
  out.lse.assign(static_cast<std::size_t>(p.heads_q * total_q), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const std::int64_t first = cu_q[b], rows = cu_q[b + 1] - first;
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      std::fill_n(out.lse.begin() + h * total_q + first, rows, -std::numeric_limits<double>::infinity());
    std::fill_n(out.o.begin() + first * q_row, rows * q_row, 0.0);
    if (rows == 0 || lengths[b] == 0) continue;
    Problem one = p;
    one.batch = 1;
    one.seqlen_q = rows;
    one.seqlen_k = lengths[b];
    const auto at = [](const std::vector<double>& x, std::int64_t from, std::int64_t n) {
      return std::vector<double>(x.begin() + from, x.begin() + from + n);
    };
    const std::int64_t keys = static_cast<std::int64_t>(b) * p.seqlen_k * row;
    const cpu::Fp64Outputs r = cpu::standard_forward_f64(one, at(q, first * q_row, rows * q_row),
                                                         at(k, keys, lengths[b] * row), at(v, keys, lengths[b] * row),
                                                         threads);
    std::copy(r.o.begin(), r.o.end(), out.o.begin() + first * q_row);
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      std::copy_n(r.lse.begin() + h * rows, rows, out.lse.begin() + h * total_q + first);
  }
  return out;
}

// Dense queries: p.batch sequences of p.seqlen_q rows each, packed back to back.
inline std::vector<int> dense_query_offsets(const Problem& p) {
  std::vector<int> cu(static_cast<std::size_t>(p.batch + 1));
  for (std::int64_t b = 0; b <= p.batch; ++b) cu[b] = static_cast<int>(b * p.seqlen_q);
  return cu;
}

// lse (heads_q, batch * seqlen_q) of dense queries in the dense order (batch, heads_q, seqlen_q).
template <class T>
std::vector<T> dense_lse(const Problem& p, const std::vector<T>& packed) {
  std::vector<T> out(packed.size());
  const std::int64_t total = p.batch * p.seqlen_q;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      std::copy_n(packed.begin() + h * total + b * p.seqlen_q, p.seqlen_q,
                  out.begin() + (b * p.heads_q + h) * p.seqlen_q);
  return out;
}

// The oracle over the cache for dense queries (batch, seqlen_q, heads_q, head_dim): o in q's
// layout, lse (batch, heads_q, seqlen_q).
inline cpu::Fp64Outputs kv_cache_oracle(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, const std::vector<int>& lengths, int threads) {
  cpu::Fp64Outputs out =
      packed_kv_cache_oracle(p, q, k, v, dense_query_offsets(p), p.batch * p.seqlen_q, lengths, threads);
  out.lse = dense_lse(p, out.lse);
  return out;
}

}  // namespace flashgen::test
