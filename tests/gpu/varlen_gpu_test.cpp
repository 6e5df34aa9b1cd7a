// Packed variable-length sequences (ForwardArgs::varlen, BackwardArgs::varlen) on the GPU:
// forward and backward of a packed batch against the fp64 oracle run one sequence at a time
// (cpu::standard_forward_f64 / standard_backward_f64), with FlashAttention's rule. Sequences
// of odd lengths, of one token, without queries or without keys, self- and cross-attention,
// GQA, causal, window, softcap, deterministic; packed rows past the last sequence are
// poisoned and must stay untouched; max_seqlen larger than every sequence (CTAs past their
// sequence exit). Head dims cover the warp-specialised kernels (TMA over the packed rows,
// O stored row by row) and the mma.sync / wgmma ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "attention_rule.h"
#include "device_buffer.h"
#include "element_values.h"
#include "flashgen/flashgen.hpp"
#include "input_precision_reference.h"
#include "runtime/cuda_driver.h"
#include "runtime/validate.h"
#include "varlen_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

struct VarlenCase {
  int head_dim, heads_q, heads_kv;
  std::vector<int> len_q, len_k;  // per sequence; len_k empty: self-attention (len_k = len_q)
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  DType dtype = DType::bf16;
  bool deterministic = false;
  int spare_rows = 3;  // packed rows past the last sequence (never read or written)
  int slack = 0;       // max_seqlen beyond the longest sequence
};

std::string name(const VarlenCase& c) {
  std::string s = fmt::format("d{}_h{}x{}_b{}", c.head_dim, c.heads_q, c.heads_kv, c.len_q.size());
  if (!c.len_k.empty()) s += "_cross";
  if (c.causal) s += "_causal";
  if (c.window_left >= 0) s += fmt::format("_win{}", c.window_left);
  if (c.softcap > 0) s += "_softcap";
  if (c.deterministic) s += "_det";
  return s + (c.dtype == DType::bf16 ? "_bf16" : "_fp16");
}

std::vector<int> offsets(const std::vector<int>& lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  return cu;
}

class VarlenGpu : public ::testing::TestWithParam<VarlenCase> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
  }
};

Tensor packed(void* data, DType t, std::int64_t rows, std::int64_t heads, std::int64_t dim) {
  Tensor x = Tensor::contiguous(data, t, {rows, heads, dim, 1}, 0);
  x.rank = 3;
  x.stride = {heads * dim, dim, 1, 0};
  return x;
}

Tensor index_vector(void* data, std::int64_t n) {
  Tensor x = Tensor::contiguous(data, DType::i32, {n, 1, 1, 1}, 0);
  x.rank = 1;
  return x;
}

TEST_P(VarlenGpu, ForwardAndBackwardMatchTheOracle) {
  const VarlenCase c = GetParam();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(fmt::format("seed {} case {}", seed, name(c)));
  std::mt19937 rng(seed);
  const std::vector<int>& len_q = c.len_q;
  const std::vector<int>& len_k = c.len_k.empty() ? c.len_q : c.len_k;
  const int batch = static_cast<int>(len_q.size());
  const std::vector<int> cu_q = offsets(len_q), cu_k = offsets(len_k);
  const std::int64_t used_q = cu_q.back(), used_k = cu_k.back();
  const std::int64_t total_q = used_q + c.spare_rows, total_k = used_k + c.spare_rows;
  const std::int64_t hd = c.head_dim, qrow = c.heads_q * hd, krow = c.heads_kv * hd;

  const std::vector<float> q = random_values(rng, static_cast<std::size_t>(total_q * qrow), 1.0f, c.dtype);
  const std::vector<float> k = random_values(rng, static_cast<std::size_t>(total_k * krow), 1.0f, c.dtype);
  const std::vector<float> v = random_values(rng, k.size(), 1.0f, c.dtype);
  const std::vector<float> dout = random_values(rng, q.size(), 1.0f, c.dtype);
  const std::vector<std::uint16_t> qb = to_bits(c.dtype, q), kb = to_bits(c.dtype, k), vb = to_bits(c.dtype, v),
                                   dob = to_bits(c.dtype, dout);
  DeviceBuffer d_q(qb.size() * 2), d_k(kb.size() * 2), d_v(vb.size() * 2), d_do(dob.size() * 2), d_o(qb.size() * 2);
  DeviceBuffer d_lse(static_cast<std::size_t>(c.heads_q * total_q) * 4), d_cu_q(cu_q.size() * 4), d_cu_k(cu_k.size() * 4);
  DeviceBuffer d_dq(qb.size() * 2), d_dk(kb.size() * 2), d_dv(vb.size() * 2);
  d_q.upload(qb.data(), qb.size() * 2);
  d_k.upload(kb.data(), kb.size() * 2);
  d_v.upload(vb.data(), vb.size() * 2);
  d_do.upload(dob.data(), dob.size() * 2);
  d_cu_q.upload(cu_q.data(), cu_q.size() * 4);
  d_cu_k.upload(cu_k.data(), cu_k.size() * 4);
  for (DeviceBuffer* b : {&d_o, &d_lse, &d_dq, &d_dk, &d_dv}) b->fill_nan();

  PackedSequences seqs;
  seqs.cu_seqlens_q = index_vector(d_cu_q.data(), batch + 1);
  seqs.cu_seqlens_k = index_vector(d_cu_k.data(), batch + 1);
  seqs.max_seqlen_q = *std::max_element(len_q.begin(), len_q.end()) + c.slack;
  seqs.max_seqlen_k = *std::max_element(len_k.begin(), len_k.end()) + c.slack;
  seqs.max_seqlen_q = std::max<std::int64_t>(seqs.max_seqlen_q, 1);
  seqs.max_seqlen_k = std::max<std::int64_t>(seqs.max_seqlen_k, 1);
  AttentionOptions options;
  options.causal = c.causal;
  options.window_left = c.window_left;
  options.window_right = c.window_right;
  options.softcap = c.softcap;
  options.deterministic = c.deterministic;

  ForwardArgs f;
  f.q = packed(d_q.data(), c.dtype, total_q, c.heads_q, hd);
  f.k = packed(d_k.data(), c.dtype, total_k, c.heads_kv, hd);
  f.v = packed(d_v.data(), c.dtype, total_k, c.heads_kv, hd);
  f.o = packed(d_o.data(), c.dtype, total_q, c.heads_q, hd);
  f.lse = Tensor::contiguous(d_lse.data(), DType::f32, {c.heads_q, total_q, 1, 1}, 0);
  f.lse.rank = 2;
  f.lse.stride = {total_q, 1, 0, 0};
  f.options = options;
  f.varlen = seqs;
  Runtime rt;
  rt.forward(f);
  BackwardArgs g;
  g.q = f.q, g.k = f.k, g.v = f.v, g.o = f.o, g.lse = f.lse;
  g.dout = packed(d_do.data(), c.dtype, total_q, c.heads_q, hd);
  g.dq = packed(d_dq.data(), c.dtype, total_q, c.heads_q, hd);
  g.dk = packed(d_dk.data(), c.dtype, total_k, c.heads_kv, hd);
  g.dv = packed(d_dv.data(), c.dtype, total_k, c.heads_kv, hd);
  g.options = options;
  g.varlen = seqs;
  rt.backward(g);
  check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize (test)");

  auto download = [&](const DeviceBuffer& b, std::size_t n) {
    std::vector<std::uint16_t> bits(n);
    b.download(bits.data(), n * 2);
    return bits;
  };
  const std::vector<std::uint16_t> ob = download(d_o, qb.size()), dqb = download(d_dq, qb.size());
  const std::vector<std::uint16_t> dkb = download(d_dk, kb.size()), dvb = download(d_dv, vb.size());
  std::vector<float> lse(static_cast<std::size_t>(c.heads_q * total_q));
  d_lse.download(lse.data(), lse.size() * 4);

  // Rows past the last sequence are untouched (still the poison's 0xffff).
  auto untouched = [](const std::vector<std::uint16_t>& bits, std::int64_t from, const char* what) {
    const auto bad = std::count_if(bits.begin() + from, bits.end(), [](std::uint16_t b) { return b != 0xffff; });
    EXPECT_EQ(bad, 0) << what << ": elements written past the last sequence";
  };
  untouched(ob, used_q * qrow, "o");
  untouched(dqb, used_q * qrow, "dq");
  untouched(dkb, used_k * krow, "dk");
  untouched(dvb, used_k * krow, "dv");
  for (int h = 0; h < c.heads_q; ++h)
    for (std::int64_t r = used_q; r < total_q; ++r)
      EXPECT_TRUE(std::isnan(lse[h * total_q + r])) << "lse written past the last sequence: head " << h << " row " << r;

  // The oracle and pt (standard attention in the input precision), one sequence at a time.
  Problem p;
  p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.head_dim = hd, p.dtype = c.dtype;
  p.options = options;
  p.options.softmax_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (c.causal) p.options.window_right = 0;
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const PackedReference ref = packed_reference(p, cu_q, cu_k, q, k, v, dout, threads);
  const auto used = [](const std::vector<std::uint16_t>& bits, std::int64_t n, DType t) {
    return from_bits(t, std::vector<std::uint16_t>(bits.begin(), bits.begin() + n));
  };
  std::vector<float> lse_used(ref.lse.size());
  for (int h = 0; h < c.heads_q; ++h)
    std::copy_n(lse.begin() + h * total_q, used_q, lse_used.begin() + h * used_q);
  const double factor = c.softcap > 0 ? 3.0 : 2.0;
  expect_rule("o", used(ob, used_q * qrow, c.dtype), ref.o, ref.pt_o, c.dtype, factor);
  expect_lse(lse_used, ref.lse);
  expect_rule("dq", used(dqb, used_q * qrow, c.dtype), ref.dq, ref.pt_dq, c.dtype, factor);
  expect_rule("dk", used(dkb, used_k * krow, c.dtype), ref.dk, ref.pt_dk, c.dtype, factor);
  expect_rule("dv", used(dvb, used_k * krow, c.dtype), ref.dv, ref.pt_dv, c.dtype, factor);
}

std::vector<VarlenCase> cases() {
  std::vector<VarlenCase> out;
  auto add = [&](VarlenCase c) { out.push_back(std::move(c)); };
  // Warp-specialised kernels (head_dim % 8 == 0 on sm_90a), self-attention with a query-less
  // and a one-token sequence.
  add({128, 4, 2, {300, 0, 1, 517, 128}, {}, true});
  add({64, 2, 2, {64, 200, 7}, {100, 200, 333}, false, -1, -1, 0.0f, DType::f16});
  add({256, 2, 1, {129, 300}, {}, true, -1, -1, 0.0f, DType::bf16, true});
  add({128, 2, 2, {50, 60, 33}, {0, 80, 1}, false, -1, -1, 0.0f, DType::bf16, false, 5, 40});  // a key-less sequence
  add({96, 6, 2, {1, 2, 3, 250}, {}, false, -1, -1, 20.0f, DType::bf16});
  add({128, 4, 4, {1000, 77, 5}, {}, false, 64, 0, 0.0f, DType::f16, true});  // window, deterministic
  // mma.sync / wgmma kernels (odd head dims).
  add({59, 2, 1, {70, 0, 150}, {90, 40, 150}, false, 20, 5, 0.0f, DType::f16});
  add({40, 3, 3, {129, 64, 2}, {}, true, -1, -1, 30.0f, DType::bf16, true, 2, 100});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Cases, VarlenGpu, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<VarlenCase>& i) { return name(i.param); });

}  // namespace
}  // namespace flashgen::test
