// The split-KV forward over a KV cache on the GPU (ForwardArgs::block_table, ::seqused_k)
// against the fp64 oracle one sequence at a time (tests/cpu/kv_cache_reference.h), with
// FlashAttention's rule: paged caches of page sizes 1..256 (odd ones too) with pages in
// random order, rows no sequence owns poisoned with NaN, per-sequence key counts (0, 1,
// ragged, full), decode and prefill-length queries, queries packed by cu_seqlens_q (rows no
// sequence owns left as they were), GQA, causal, window, softcap. The CPU backend runs the
// same case and must agree with the oracle too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "attention_rule.h"
#include "device_buffer.h"
#include "element_values.h"
#include "flashgen/flashgen.hpp"
#include "kv_cache_pt.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cuda_driver.h"
#include "runtime/validate.h"
#include "tests/cpu/kv_cache_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

struct KvCase {
  int head_dim, seqlen_q, capacity, batch, heads_q, heads_kv;
  int page_size;  // 0: a dense cache
  // seqused_k given; else every sequence holds `capacity` keys (a multiple of page_size:
  // without key counts a paged sequence is its whole pages)
  bool per_sequence;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  DType dtype = DType::bf16;
  // Queries packed by cu_seqlens_q (ForwardArgs::varlen over the cache): sequence b has
  // packed_query_rows(b) rows, seqlen_q being their bound.
  bool packed = false;

  // seqlen_q, 1, 0, then ragged counts below seqlen_q: a prefill chunk, a decode step, a
  // sequence without queries.
  int packed_query_rows(int b) const { return b == 0 ? seqlen_q : b == 1 ? 1 : b == 2 ? 0 : 1 + (7 * b) % seqlen_q; }
};

std::string name(const KvCase& c) {
  std::string s = fmt::format("d{}_q{}_cap{}_b{}_h{}x{}_{}", c.head_dim, c.seqlen_q, c.capacity, c.batch, c.heads_q,
                              c.heads_kv, c.page_size ? fmt::format("page{}", c.page_size) : "dense");
  if (c.per_sequence) s += "_seqused";
  if (c.causal) s += "_causal";
  if (c.window_left >= 0) s += fmt::format("_win{}", c.window_left);
  if (c.softcap > 0) s += "_softcap";
  if (c.packed) s += "_packed";
  return s + (c.dtype == DType::bf16 ? "_bf16" : "_fp16");
}

// The query rows of the sequences, as packed offsets: dense queries are batch x seqlen_q
// rows back to back; packed ones start after a row no sequence owns and end before another.
struct QueryRows {
  std::vector<int> cu;
  std::int64_t total;
};
QueryRows query_rows(const KvCase& c) {
  QueryRows r{{c.packed ? 1 : 0}, 0};
  for (int b = 0; b < c.batch; ++b) r.cu.push_back(r.cu.back() + (c.packed ? c.packed_query_rows(b) : c.seqlen_q));
  r.total = r.cu.back() + (c.packed ? 1 : 0);
  return r;
}

// Rows [cu[0], cu[batch]) of o (row elements apart) and the matching lse columns (heads_q,
// total): what the sequences own.
template <class T>
std::vector<T> owned_rows(const std::vector<T>& x, const QueryRows& r, std::int64_t row) {
  return std::vector<T>(x.begin() + r.cu.front() * row, x.begin() + r.cu.back() * row);
}
template <class T>
std::vector<T> owned_lse(const std::vector<T>& lse, const QueryRows& r, int heads_q) {
  std::vector<T> out;
  for (int h = 0; h < heads_q; ++h)
    out.insert(out.end(), lse.begin() + h * r.total + r.cu.front(), lse.begin() + h * r.total + r.cu.back());
  return out;
}

class KvCacheGpu : public ::testing::TestWithParam<KvCase> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
  }
};

TEST_P(KvCacheGpu, ForwardMatchesTheOracle) {
  const KvCase c = GetParam();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(fmt::format("seed {} case {}", seed, name(c)));
  std::mt19937 rng(seed);
  const std::int64_t row = static_cast<std::int64_t>(c.heads_kv) * c.head_dim;
  const std::int64_t q_row = static_cast<std::int64_t>(c.heads_q) * c.head_dim;
  QueryRows rows = query_rows(c);
  const std::vector<float> q = random_values(rng, static_cast<std::size_t>(rows.total * q_row), 1.0f, c.dtype);
  const std::vector<float> k = random_values(rng, static_cast<std::size_t>(c.batch * c.capacity * row), 1.0f, c.dtype);
  const std::vector<float> v = random_values(rng, k.size(), 1.0f, c.dtype);
  std::vector<int> lengths(c.batch, c.capacity);
  if (c.per_sequence) {  // 0, 1, full, then ragged counts
    std::uniform_int_distribution<int> any(1, c.capacity);
    for (int b = 0; b < c.batch; ++b) lengths[b] = b == 0 ? 0 : b == 1 ? 1 : b == 2 ? c.capacity : any(rng);
  }

  // The cache as the call sees it: dense, or pages in random order with NaN in rows no
  // sequence owns (a read of one would poison the row's output).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  PagedCache paged;
  std::vector<float> k_call = k, v_call = v;
  std::array<std::int64_t, 4> kv_shape{c.batch, c.capacity, c.heads_kv, c.head_dim};
  if (c.page_size > 0) {
    paged = make_paged_cache(k, v, c.batch, c.capacity, row, lengths, c.page_size, rng, nan);
    k_call = paged.k;
    v_call = paged.v;
    kv_shape = {paged.num_pages, c.page_size, c.heads_kv, c.head_dim};
  }
  const std::vector<std::uint16_t> qb = to_bits(c.dtype, q), kb = to_bits(c.dtype, k_call), vb = to_bits(c.dtype, v_call);
  DeviceBuffer dq(qb.size() * 2), dk(kb.size() * 2), dv(vb.size() * 2), d_o(qb.size() * 2);
  DeviceBuffer dlse(static_cast<std::size_t>(rows.total) * c.heads_q * 4);
  DeviceBuffer dtable(std::max<std::size_t>(4, paged.table.size() * 4)), dused(static_cast<std::size_t>(c.batch) * 4);
  DeviceBuffer dcu(rows.cu.size() * 4);
  dq.upload(qb.data(), qb.size() * 2);
  dk.upload(kb.data(), kb.size() * 2);
  dv.upload(vb.data(), vb.size() * 2);
  d_o.fill_nan();
  dlse.fill_nan();
  if (c.page_size > 0) dtable.upload(paged.table.data(), paged.table.size() * 4);
  dused.upload(lengths.data(), lengths.size() * 4);
  dcu.upload(rows.cu.data(), rows.cu.size() * 4);

  // q, o and lse dense (batch, seqlen_q, ...) or packed (total_q, ...) over the same storage.
  const auto q_tensor = [&](void* data, DType t, int device) {
    if (c.packed) return Tensor::contiguous3(data, t, {rows.total, c.heads_q, c.head_dim}, device);
    return Tensor::contiguous(data, t, {c.batch, c.seqlen_q, c.heads_q, c.head_dim}, device);
  };
  const auto lse_tensor = [&](float* data, int device) {
    if (!c.packed) return Tensor::contiguous3(data, DType::f32, {c.batch, c.heads_q, c.seqlen_q}, device);
    Tensor t = Tensor::contiguous(data, DType::f32, {c.heads_q, rows.total, 1, 1}, device);
    t.rank = 2;
    return t;
  };
  ForwardArgs a;
  a.q = q_tensor(dq.data(), c.dtype, 0);
  a.k = Tensor::contiguous(dk.data(), c.dtype, kv_shape, 0);
  a.v = Tensor::contiguous(dv.data(), c.dtype, kv_shape, 0);
  a.o = q_tensor(d_o.data(), c.dtype, 0);
  a.lse = lse_tensor(static_cast<float*>(dlse.data()), 0);
  a.options.causal = c.causal;
  a.options.window_left = c.window_left;
  a.options.window_right = c.window_right;
  a.options.softcap = c.softcap;
  if (c.page_size > 0) {
    a.block_table = Tensor::contiguous(dtable.data(), DType::i32, {c.batch, paged.max_pages, 1, 1}, 0);
    a.block_table.rank = 2;
  }
  if (c.per_sequence) {
    a.seqused_k = Tensor::contiguous(dused.data(), DType::i32, {c.batch, 1, 1, 1}, 0);
    a.seqused_k.rank = 1;
  }
  if (c.packed) {
    a.varlen.cu_seqlens_q = Tensor::contiguous(dcu.data(), DType::i32, {c.batch + 1, 1, 1, 1}, 0);
    a.varlen.cu_seqlens_q.rank = 1;
    a.varlen.max_seqlen_q = c.seqlen_q;
  }
  Runtime rt;
  rt.forward(a);
  check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize (test)");
  std::vector<std::uint16_t> ob(qb.size());
  d_o.download(ob.data(), ob.size() * 2);
  std::vector<float> lse(static_cast<std::size_t>(rows.total) * c.heads_q);
  dlse.download(lse.data(), lse.size() * 4);

  // The oracle over the dense cache, sequence by sequence; pt: the same in input precision.
  Problem p;
  p.batch = c.batch, p.seqlen_q = c.seqlen_q, p.seqlen_k = c.capacity, p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv, p.head_dim = c.head_dim, p.dtype = c.dtype;
  p.options = a.options;
  p.options.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.causal) p.options.window_right = 0;
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const cpu::Fp64Outputs ref = packed_kv_cache_oracle(p, {q.begin(), q.end()}, {k.begin(), k.end()},
                                                      {v.begin(), v.end()}, rows.cu, rows.total, lengths, threads);
  const std::vector<float> pt = packed_kv_cache_pt(p, q, k, v, rows.cu, rows.total, lengths, threads);
  // What the sequences own against the oracle, in the packed order; the rest untouched.
  const std::vector<double> ref_lse = owned_lse(ref.lse, rows, c.heads_q);
  const auto expect_outputs = [&](const char* what, const std::vector<float>& o, const std::vector<float>& lse_packed) {
    SCOPED_TRACE(what);
    expect_rule("o", owned_rows(o, rows, q_row), owned_rows(ref.o, rows, q_row), owned_rows(pt, rows, q_row), c.dtype,
                c.softcap > 0 ? 3.0 : 2.0);
    expect_lse(owned_lse(lse_packed, rows, c.heads_q), ref_lse);
    std::size_t written = 0;
    for (std::int64_t i = 0; i < rows.total * q_row; ++i)
      written += (i < rows.cu.front() * q_row || i >= rows.cu.back() * q_row) && !std::isnan(o[i]);
    EXPECT_EQ(written, 0u) << "o written in rows no sequence owns";
  };
  // Dense queries' lse comes in (batch, heads_q, seqlen_q): permuted into the packed order.
  const auto packed_lse = [&](const std::vector<float>& x) {
    if (c.packed) return x;
    std::vector<float> out(x.size());
    for (int b = 0; b < c.batch; ++b)
      for (int h = 0; h < c.heads_q; ++h)
        std::copy_n(x.begin() + (b * c.heads_q + h) * c.seqlen_q, c.seqlen_q,
                    out.begin() + h * rows.total + b * c.seqlen_q);
    return out;
  };
  expect_outputs("gpu", from_bits(c.dtype, ob), packed_lse(lse));

  // The CPU backend on the same cache (host copies, fp32 values of the same bits).
  ForwardArgs h = a;
  std::vector<float> hq = from_bits(c.dtype, qb), hk = from_bits(c.dtype, kb), hv = from_bits(c.dtype, vb);
  std::vector<float> ho(hq.size(), nan), hlse(lse.size(), nan);
  h.q = q_tensor(hq.data(), DType::f32, kCpu);
  h.k = Tensor::contiguous(hk.data(), DType::f32, kv_shape);
  h.v = Tensor::contiguous(hv.data(), DType::f32, kv_shape);
  h.o = q_tensor(ho.data(), DType::f32, kCpu);
  h.lse = lse_tensor(hlse.data(), kCpu);
  if (c.page_size > 0) h.block_table.data = paged.table.data(), h.block_table.device = kCpu;
  if (c.per_sequence) h.seqused_k.data = lengths.data(), h.seqused_k.device = kCpu;
  if (c.packed) h.varlen.cu_seqlens_q.data = rows.cu.data(), h.varlen.cu_seqlens_q.device = kCpu;
  rt.forward(h);
  expect_outputs("cpu", ho, packed_lse(hlse));
}

std::vector<KvCase> cases() {
  return {
      // Decode over paged caches: page sizes 1, 7, 16, 32, 64, 128, 256 (pages of whole K/V
      // tiles, a multiple of block_n, load as dense tiles; others by rows); GQA 4:1 and 8:1;
      // split keys; the speculative 16 positions x 4 heads (64-row tiles) both ways.
      {128, 1, 3000, 5, 32, 8, 16, true},
      {128, 16, 3000, 3, 32, 8, 128, true},
      {128, 16, 1500, 2, 32, 8, 16, true, true},
      {128, 1, 2049, 4, 8, 1, 256, true, true},
      {64, 4, 700, 4, 16, 4, 7, true, true, -1, -1, 0.0f, DType::f16},
      {128, 2, 300, 3, 4, 4, 1, false},
      {256, 16, 999, 3, 8, 2, 32, true, false, 100, 0, 30.0f},
      {80, 1, 5000, 3, 6, 2, 64, true, true, -1, -1, 0.0f, DType::f16},
      // Dense caches with per-sequence key counts.
      {128, 1, 4099, 4, 32, 8, 0, true},
      {59, 3, 800, 4, 4, 2, 0, true, true, -1, -1, 0.0f, DType::f16},
      // Prefill-length queries over a paged cache (the split-KV kernel at any seqlen_q).
      {128, 100, 600, 3, 4, 2, 16, true, true},
      {64, 37, 512, 3, 2, 2, 256, false, false, 20, 5, 0.0f, DType::f16},  // whole pages: no seqused_k
      // Packed queries over the cache (prefill chunks, decode steps and an empty sequence in
      // one call): paged and dense caches, causal per sequence, GQA-packed tiles that span
      // sequences' ends, many splits (B = 5 at 4k keys) and none (long chunks).
      {128, 70, 700, 5, 8, 2, 16, true, true, -1, -1, 0.0f, DType::bf16, true},
      {128, 3, 4000, 5, 32, 8, 64, true, false, -1, -1, 0.0f, DType::bf16, true},
      {64, 9, 333, 4, 4, 1, 0, true, true, -1, -1, 0.0f, DType::f16, true},
      {96, 200, 1024, 6, 4, 4, 256, false, false, 64, 0, 15.0f, DType::bf16, true},
  };
}
INSTANTIATE_TEST_SUITE_P(Cases, KvCacheGpu, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<KvCase>& i) { return name(i.param); });

}  // namespace
}  // namespace flashgen::test
