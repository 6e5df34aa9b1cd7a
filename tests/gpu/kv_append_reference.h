// The oracle of the KV append (Runtime::append_kv) for the kernel tests (GPU and emulator) and
// the CPU backend's test: a case's random inputs in host buffers, the caches and rotated
// queries they must give (computed here in double, sharing no code with the backends), and
// the comparison: copied elements bit for bit, rotated ones within one step of the dtype,
// rows that must not be written unchanged, NaN where a query's position has no angle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "attention_rule.h"
#include "flashgen/flashgen.hpp"
#include "input_precision_reference.h"
#include "kv_append_cases.h"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::test {

// The case's inputs as 16-bit host buffers (row-major, contiguous), caches filled with old
// rows that only the appended positions may change.
struct KvAppendBuffers {
  std::vector<std::uint16_t> k, v, k_cache, v_cache, q, q_rotated, cos, sin;
  std::vector<std::int32_t> cache_seqlens, block_table, cu;  // cu: packed cases' offsets
  int num_pages = 0, pages_per_seq = 0;
  int rows = 0;  // rows of k, v and q: packed, the sequences' plus two spare ones

  // New rows of sequence s, and where its row i is in k, v and q.
  int length(const KvAppendCase& c, int s) const { return c.packed ? cu[s + 1] - cu[s] : c.seqlen_new; }
  std::size_t row(const KvAppendCase& c, int s, int i) const {
    return c.packed ? std::size_t(cu[s]) + i : std::size_t(s) * c.seqlen_new + i;
  }
  int q_length(const KvAppendCase& c, int s) const { return c.packed ? length(c, s) : c.seqlen_q; }
  std::size_t q_row(const KvAppendCase& c, int s, int i) const {
    return c.packed ? row(c, s, i) : std::size_t(s) * c.seqlen_q + i;
  }
};

inline std::uint16_t bits_of(DType t, float x) {
  return t == DType::bf16 ? cpu::float_to_bf16_bits(x) : cpu::float_to_half_bits(x);
}
inline double value_of(DType t, std::uint16_t b) {
  return t == DType::bf16 ? cpu::bf16_bits_to_float(b) : cpu::half_bits_to_float(b);
}

inline KvAppendBuffers kv_append_inputs(const KvAppendCase& c, std::mt19937& rng) {
  const int cap = capacity_of(c);
  KvAppendBuffers b;
  std::normal_distribution<float> normal;
  const auto random_rows = [&](std::size_t n) {
    std::vector<std::uint16_t> x(n);
    for (auto& e : x) e = bits_of(c.dtype, normal(rng));
    return x;
  };
  b.cu = {0};
  for (int s = 0; c.packed && s < c.batch; ++s) b.cu.push_back(b.cu.back() + packed_length(c.seqlen_new, s));
  b.rows = c.packed ? b.cu.back() + 2 : c.batch * c.seqlen_new;
  const std::size_t d = c.head_dim;
  b.k = random_rows(std::size_t(b.rows) * c.heads_kv * d);
  b.v = random_rows(b.k.size());
  std::size_t cache_rows = std::size_t(c.batch) * cap * c.heads_kv;
  if (c.page_size) {
    b.pages_per_seq = cap / c.page_size;
    b.num_pages = c.batch * b.pages_per_seq + 1;  // one page no sequence names
    cache_rows = std::size_t(b.num_pages) * c.page_size * c.heads_kv;
    std::vector<std::int32_t> pages(b.num_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    b.block_table.assign(pages.begin(), pages.begin() + c.batch * b.pages_per_seq);
  }
  b.k_cache = random_rows(cache_rows * d);
  b.v_cache = random_rows(cache_rows * d);
  for (int s = 0; s < c.batch; ++s)
    b.cache_seqlens.push_back(std::uniform_int_distribution<int>(0, cap - b.length(c, s))(rng));
  if (c.out_of_range) {
    b.cache_seqlens[0] = cap - b.length(c, 0) + 1;  // its last new row falls off the cache
    // The first new row of the next sequence with rows lands on a page entry outside the cache.
    int victim = 1;
    while (victim < c.batch && b.length(c, victim) == 0) ++victim;
    if (c.page_size && victim < c.batch)
      b.block_table[victim * b.pages_per_seq + b.cache_seqlens[victim] / c.page_size] = b.num_pages;
  }
  if (c.rotary_dim) {
    // Angles of a real RoPE table: position t, frequency 10000^(-2j / rotary_dim).
    for (int t = 0; t < cap; ++t)
      for (int j = 0; j < c.rotary_dim / 2; ++j) {
        const double angle = t * std::pow(10000.0, -2.0 * j / c.rotary_dim);
        b.cos.push_back(bits_of(c.dtype, static_cast<float>(std::cos(angle))));
        b.sin.push_back(bits_of(c.dtype, static_cast<float>(std::sin(angle))));
      }
  }
  if (c.heads_q) {
    b.q = random_rows(std::size_t(c.packed ? b.rows : c.batch * c.seqlen_q) * c.heads_q * d);
    b.q_rotated.assign(b.q.size(), 0xffff);  // poisoned: NaN
  }
  return b;
}

// Where each buffer lives for the backend under test: `place` returns the address of its copy
// (the host buffer itself for the CPU and the emulator, a device copy for the GPU).
using Place = std::function<void*(void* host, std::size_t bytes)>;

inline KvAppendArgs kv_append_args(const KvAppendCase& c, KvAppendBuffers& b, const Place& place, int device) {
  const int cap = capacity_of(c);
  const auto rows = [&](std::vector<std::uint16_t>& x, std::int64_t n0, std::int64_t n1, std::int64_t heads) {
    return Tensor::contiguous(place(x.data(), x.size() * 2), c.dtype, {n0, n1, heads, c.head_dim}, device);
  };
  // The new rows (and q): (batch, seqlen, heads, head_dim), or packed (rows, heads, head_dim).
  const auto new_rows = [&](std::vector<std::uint16_t>& x, std::int64_t seqlen, std::int64_t heads) {
    if (!c.packed) return rows(x, c.batch, seqlen, heads);
    Tensor t = Tensor::contiguous(place(x.data(), x.size() * 2), c.dtype, {b.rows, heads, c.head_dim, 1}, device);
    t.rank = 3;
    t.stride = {heads * c.head_dim, c.head_dim, 1, 0};
    return t;
  };
  const auto ints = [&](std::vector<std::int32_t>& x, std::int64_t n0, std::int64_t n1) {
    Tensor t = Tensor::contiguous(place(x.data(), x.size() * 4), DType::i32, {n0, n1 ? n1 : 1, 1, 1}, device);
    t.rank = n1 ? 2 : 1;
    return t;
  };
  KvAppendArgs a;
  a.k = new_rows(b.k, c.seqlen_new, c.heads_kv);
  a.v = new_rows(b.v, c.seqlen_new, c.heads_kv);
  if (c.packed) a.cu_seqlens = ints(b.cu, c.batch + 1, 0);
  const std::int64_t outer = c.page_size ? b.num_pages : c.batch, inner = c.page_size ? c.page_size : cap;
  a.k_cache = rows(b.k_cache, outer, inner, c.heads_kv);
  a.v_cache = rows(b.v_cache, outer, inner, c.heads_kv);
  a.cache_seqlens = ints(b.cache_seqlens, c.batch, 0);
  if (c.page_size) a.block_table = ints(b.block_table, c.batch, b.pages_per_seq);
  if (c.rotary_dim) {
    for (auto [table, t] : {std::pair{&b.cos, &a.rotary.cos}, {&b.sin, &a.rotary.sin}}) {
      *t = Tensor::contiguous(place(table->data(), table->size() * 2), c.dtype, {cap, c.rotary_dim / 2, 1, 1},
                              device);
      t->rank = 2;
    }
    a.rotary.interleaved = c.interleaved;
  }
  if (c.heads_q) {
    a.q = new_rows(b.q, c.seqlen_q, c.heads_q);
    a.q_rotated = c.q_in_place ? a.q : new_rows(b.q_rotated, c.seqlen_q, c.heads_q);
    a.q_at_consecutive_positions = c.consecutive;
  }
  return a;
}

// What the buffers must hold afterwards, and how far each element may be from it (0: bit
// for bit; NaN expected: NaN).
struct KvAppendExpected {
  std::vector<double> k_cache, v_cache, q_rotated;
  std::vector<double> k_tol, q_tol;  // v is copied: exact
};

inline KvAppendExpected kv_append_expected(const KvAppendCase& c, const KvAppendBuffers& b) {
  const int cap = capacity_of(c);
  const std::size_t d = c.head_dim;
  const auto values = [&](const std::vector<std::uint16_t>& x) {
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = value_of(c.dtype, x[i]);
    return out;
  };
  KvAppendExpected e{values(b.k_cache), values(b.v_cache), {}, std::vector<double>(b.k_cache.size(), 0.0), {}};
  const auto angle = [&](const std::vector<std::uint16_t>& table, int pos, int j) {
    return value_of(c.dtype, table[std::size_t(pos) * (c.rotary_dim / 2) + j]);
  };
  // Row `x` rotated at `pos` (NaN where pos has no row in the tables), tolerance per element.
  const auto rotate = [&](std::vector<double>& x, std::vector<double>& tol, int pos) {
    const int half = c.rotary_dim / 2;
    for (int j = 0; j < half; ++j) {
      const int lo = c.interleaved ? 2 * j : j, hi = c.interleaved ? 2 * j + 1 : j + half;
      if (pos < 0 || pos >= cap) {
        x[lo] = x[hi] = NAN;
        continue;
      }
      const double co = angle(b.cos, pos, j), si = angle(b.sin, pos, j), a = x[lo], y = x[hi];
      x[lo] = a * co - y * si;
      x[hi] = a * si + y * co;
      tol[lo] = dtype_step(c.dtype, x[lo]);
      tol[hi] = dtype_step(c.dtype, x[hi]);
    }
  };
  for (int s = 0; s < c.batch; ++s)
    for (int i = 0; i < b.length(c, s); ++i) {
      const int pos = b.cache_seqlens[s] + i;
      if (pos >= cap) continue;  // not written
      std::size_t outer = s, row = pos;
      if (c.page_size) {
        const int page = b.block_table[std::size_t(s) * b.pages_per_seq + pos / c.page_size];
        if (page < 0 || page >= b.num_pages) continue;  // not written
        outer = page, row = pos % c.page_size;
      }
      const std::size_t rows_per_outer = c.page_size ? c.page_size : cap;
      for (int h = 0; h < c.heads_kv; ++h) {
        const std::size_t dst = ((outer * rows_per_outer + row) * c.heads_kv + h) * d;
        const std::size_t src = (b.row(c, s, i) * c.heads_kv + h) * d;
        std::vector<double> x(d), tol(d, 0.0);
        for (std::size_t col = 0; col < d; ++col) x[col] = value_of(c.dtype, b.k[src + col]);
        if (c.rotary_dim) rotate(x, tol, pos);
        for (std::size_t col = 0; col < d; ++col) {
          e.k_cache[dst + col] = x[col];
          e.k_tol[dst + col] = tol[col];
          e.v_cache[dst + col] = value_of(c.dtype, b.v[src + col]);
        }
      }
    }
  if (c.heads_q) {
    // Rows no sequence owns keep what the output held (q itself when rotated in place).
    e.q_rotated = values(c.q_in_place ? b.q : b.q_rotated);
    e.q_tol.assign(e.q_rotated.size(), 0.0);
    const std::vector<double> q = values(b.q);
    for (int s = 0; s < c.batch; ++s)
      for (int i = 0; i < b.q_length(c, s); ++i)
        for (int h = 0; h < c.heads_q; ++h) {
          const std::size_t at = (b.q_row(c, s, i) * c.heads_q + h) * d;
          std::vector<double> x(q.begin() + at, q.begin() + at + d), tol(d, 0.0);
          rotate(x, tol, b.cache_seqlens[s] + (c.consecutive ? i : 0));
          std::copy(x.begin(), x.end(), e.q_rotated.begin() + at);
          std::copy(tol.begin(), tol.end(), e.q_tol.begin() + at);
        }
  }
  return e;
}

// Every element of `out` (16-bit bits) against the expectation; the first few misses reported.
inline void expect_append(const char* what, DType t, const std::vector<std::uint16_t>& out,
                          const std::vector<double>& want, const std::vector<double>* tol) {
  ASSERT_EQ(out.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double got = value_of(t, out[i]), allowed = tol ? (*tol)[i] : 0.0;
    const bool ok = std::isnan(want[i]) ? std::isnan(got) : std::abs(got - want[i]) <= allowed;
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got << ", expected " << want[i] << " within " << allowed;
  }
  EXPECT_EQ(bad, 0u) << what << ": elements off";
}

inline void expect_kv_append(const KvAppendCase& c, const KvAppendBuffers& b, const KvAppendExpected& e) {
  expect_append("k_cache", c.dtype, b.k_cache, e.k_cache, &e.k_tol);
  expect_append("v_cache", c.dtype, b.v_cache, e.v_cache, nullptr);
  if (c.heads_q) expect_append("q_rotated", c.dtype, c.q_in_place ? b.q : b.q_rotated, e.q_rotated, &e.q_tol);
}

}  // namespace flashgen::test
