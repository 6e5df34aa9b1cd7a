// The generated kernels (sm_80, and sm_90a's where they load by cp.async), run on the CPU
// emulator (sm80_emulator.h) through the same launch plans the GPU backend uses
// (runtime/launch_plan.h), against the fp64 oracle with FlashAttention's rule. Catches
// indexing, masking, pipeline and layout bugs without a GPU; the gpu label checks the real
// hardware.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "attention_rule.h"
#include "emulation_cases.h"
#include "input_precision_reference.h"
#include "kv_cache_pt.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/launch_plan.h"
#include "sm80_emulator.h"
#include "tests/cpu/kv_cache_reference.h"
#include "varlen_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using Shape = std::array<std::int64_t, 4>;

std::uint16_t to_bits(DType t, float x) {
  return t == DType::bf16 ? cpu::float_to_bf16_bits(x) : cpu::float_to_half_bits(x);
}
float from_bits(DType t, std::uint16_t b) {
  return t == DType::bf16 ? cpu::bf16_bits_to_float(b) : cpu::half_bits_to_float(b);
}
std::vector<std::uint16_t> to_bits(DType t, const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_bits(t, x[i]);
  return out;
}

// Elements [from, to) (to the end by default) still hold the 0xffff poison: never written.
bool untouched(const std::vector<std::uint16_t>& x, std::int64_t from, std::int64_t to = -1) {
  const auto end = to < 0 ? x.end() : x.begin() + to;
  return std::all_of(x.begin() + from, end, [](std::uint16_t b) { return b == 0xffff; });
}

// A strided view into a host buffer of 16-bit elements (poisoned 0xffff = NaN).
struct View {
  std::vector<std::uint16_t>* storage;
  std::int64_t offset;
  Shape shape, stride;
  DType dtype;

  std::int64_t index(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t x) const {
    return offset + b * stride[0] + s * stride[1] + h * stride[2] + x;
  }
  Tensor tensor() const {
    Tensor t;
    t.data = storage->data() + offset;
    t.dtype = dtype;
    t.device = kCpu;
    t.rank = 4;
    t.shape = shape;
    t.stride = stride;
    return t;
  }
  template <class F>
  void each(F f) const {
    std::int64_t i = 0;
    for (std::int64_t b = 0; b < shape[0]; ++b)
      for (std::int64_t s = 0; s < shape[1]; ++s)
        for (std::int64_t h = 0; h < shape[2]; ++h)
          for (std::int64_t x = 0; x < shape[3]; ++x) f(index(b, s, h, x), i++);
  }
  void scatter(const std::vector<float>& v) const {
    each([&](std::int64_t at, std::int64_t i) { (*storage)[at] = to_bits(dtype, v[i]); });
  }
  std::vector<float> gather() const {
    std::vector<float> out(shape[0] * shape[1] * shape[2] * shape[3]);
    each([&](std::int64_t at, std::int64_t i) { out[i] = from_bits(dtype, (*storage)[at]); });
    return out;
  }
};

View padded(std::vector<std::uint16_t>& st, Shape shape, std::int64_t pad, DType t) {
  const std::int64_t row = shape[2] * shape[3] + pad;
  st.assign(shape[0] * shape[1] * row, 0xffff);
  return View{&st, 0, shape, {shape[1] * row, row, shape[3], 1}, t};
}

std::vector<float> random_values(std::mt19937& rng, std::size_t n, DType t) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = round_to(t, dist(rng));
  return out;
}

void run_plan(const std::vector<KernelLaunch>& plan) {
  for (const KernelLaunch& l : plan) {
    if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) continue;
    const auto it = emu::registry().find(l.spec.uri());
    ASSERT_NE(it, emu::registry().end()) << l.spec.uri() << " was not emitted for the emulator (emulation_cases.h)";
    emu::launch(it->second, dim3{l.grid[0], l.grid[1], l.grid[2]}, l.spec.threads(), l.spec.shared_memory_bytes(),
                l.params);
  }
}

std::string name_of(const EmulationCase& c) {
  return fmt::format("d{}_q{}_k{}_b{}_h{}x{}_{}{}{}{}{}{}{}{}{}", c.head_dim, c.seqlen_q, c.seqlen_k, c.batch, c.heads_q,
                     c.heads_kv, c.dtype == DType::bf16 ? "bf16" : "fp16", c.causal ? "_causal" : "",
                     c.window_left >= 0 || c.window_right >= 0 ? "_window" : "", c.softcap > 0 ? "_softcap" : "",
                     c.deterministic ? "_det" : "", c.packed_qkv ? "_packed" : "", c.varlen ? "_varlen" : "",
                     c.cache_page_size < 0 ? "" : fmt::format("_cache{}", c.cache_page_size),
                     c.arch == Arch::sm_80 ? "" : "_sm90a");
}

// Packed sequences (ForwardArgs::varlen) of varlen_length() rows each, two spare rows after
// the last one that must stay poisoned, against the per-sequence oracle.
void run_varlen(const EmulationCase& c, std::mt19937& rng) {
  const DType t = c.dtype;
  std::vector<int> cu_q{0}, cu_k{0};
  for (int b = 0; b < c.batch; ++b) {
    cu_q.push_back(cu_q.back() + varlen_length(c.seqlen_q, b));
    cu_k.push_back(cu_k.back() + varlen_length(c.seqlen_k, b));
  }
  constexpr int kSpare = 2;
  const std::int64_t total_q = cu_q.back() + kSpare, total_k = cu_k.back() + kSpare;
  const std::int64_t qrow = std::int64_t{c.heads_q} * c.head_dim, krow = std::int64_t{c.heads_kv} * c.head_dim;
  const std::vector<float> qv = random_values(rng, total_q * qrow, t), kv = random_values(rng, total_k * krow, t),
                           vv = random_values(rng, total_k * krow, t), dov = random_values(rng, total_q * qrow, t);
  std::vector<std::uint16_t> q = to_bits(t, qv), k = to_bits(t, kv), v = to_bits(t, vv), dout = to_bits(t, dov);
  std::vector<std::uint16_t> o(q.size(), 0xffff), dq(q.size(), 0xffff), dk(k.size(), 0xffff), dv(k.size(), 0xffff);
  std::vector<float> lse(static_cast<std::size_t>(c.heads_q * total_q), NAN);
  const auto rows = [&](std::vector<std::uint16_t>& x, std::int64_t n, std::int64_t heads) {
    Tensor r = Tensor::contiguous(x.data(), t, {n, heads, c.head_dim, 1});
    r.rank = 3;
    r.stride = {heads * c.head_dim, c.head_dim, 1, 0};
    return r;
  };
  const auto offsets = [](std::vector<int>& cu) {
    Tensor r = Tensor::contiguous(cu.data(), DType::i32, {static_cast<std::int64_t>(cu.size()), 1, 1, 1});
    r.rank = 1;
    return r;
  };
  PackedSequences seqs;
  seqs.cu_seqlens_q = offsets(cu_q);
  seqs.cu_seqlens_k = offsets(cu_k);
  seqs.max_seqlen_q = c.seqlen_q;
  seqs.max_seqlen_k = c.seqlen_k;
  ForwardArgs fa;
  fa.q = rows(q, total_q, c.heads_q), fa.k = rows(k, total_k, c.heads_kv), fa.v = rows(v, total_k, c.heads_kv);
  fa.o = rows(o, total_q, c.heads_q);
  fa.lse = Tensor::contiguous(lse.data(), DType::f32, {c.heads_q, total_q, 1, 1});
  fa.lse.rank = 2;
  fa.options.causal = c.causal;
  fa.options.window_left = c.window_left;
  fa.options.window_right = c.window_right;
  fa.options.softcap = c.softcap;
  fa.options.deterministic = c.deterministic;
  fa.varlen = seqs;
  const Problem p = validate_forward(fa);
  run_plan(plan_forward(fa, p, c.arch, 1, nullptr));
  BackwardArgs ba;
  ba.q = fa.q, ba.k = fa.k, ba.v = fa.v, ba.o = fa.o, ba.lse = fa.lse, ba.options = fa.options, ba.varlen = seqs;
  ba.dout = rows(dout, total_q, c.heads_q);
  ba.dq = rows(dq, total_q, c.heads_q), ba.dk = rows(dk, total_k, c.heads_kv), ba.dv = rows(dv, total_k, c.heads_kv);
  const Problem pb = validate_backward(ba);
  std::vector<float> workspace(backward_workspace_bytes(pb) / sizeof(float), NAN);
  run_plan(plan_backward(ba, pb, c.arch, workspace.data()));

  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const PackedReference ref = packed_reference(p, cu_q, cu_k, qv, kv, vv, dov, threads);
  const auto covered = [&](const std::vector<std::uint16_t>& x, std::int64_t n) {
    std::vector<float> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out[i] = from_bits(t, x[i]);
    return out;
  };
  const double factor = c.softcap > 0 ? 3.0 : 2.0;
  const std::int64_t used_q = cu_q.back(), used_k = cu_k.back();
  expect_rule("o", covered(o, used_q * qrow), ref.o, ref.pt_o, t, factor);
  expect_rule("dq", covered(dq, used_q * qrow), ref.dq, ref.pt_dq, t, factor);
  expect_rule("dk", covered(dk, used_k * krow), ref.dk, ref.pt_dk, t, factor);
  expect_rule("dv", covered(dv, used_k * krow), ref.dv, ref.pt_dv, t, factor);
  std::vector<float> lse_used(ref.lse.size());
  for (int h = 0; h < c.heads_q; ++h) std::copy_n(lse.begin() + h * total_q, used_q, lse_used.begin() + h * used_q);
  expect_lse(lse_used, ref.lse);
  // The spare rows are no sequence's: never written.
  EXPECT_TRUE(untouched(o, used_q * qrow) && untouched(dq, used_q * qrow)) << "o or dq written past the sequences";
  EXPECT_TRUE(untouched(dk, used_k * krow) && untouched(dv, used_k * krow)) << "dk or dv written past the sequences";
}

// A forward over a KV cache (EmulationCase::cache_page_size) with kv_cache_key_count() keys
// per sequence: a paged cache's pages shuffled, NaN in the rows no sequence owns; queries
// dense or packed (varlen_length() rows each, a spare row before and after that must stay
// poisoned); split as an H200 would split it; against the per-sequence oracle.
void run_kv_cache(const EmulationCase& c, std::mt19937& rng) {
  const DType t = c.dtype;
  const std::int64_t qrow = std::int64_t{c.heads_q} * c.head_dim, krow = std::int64_t{c.heads_kv} * c.head_dim;
  std::vector<int> cu{c.varlen ? 1 : 0}, lengths;
  for (int b = 0; b < c.batch; ++b) {
    cu.push_back(cu.back() + (c.varlen ? varlen_length(c.seqlen_q, b) : c.seqlen_q));
    lengths.push_back(kv_cache_key_count(c.seqlen_k, b));
  }
  const std::int64_t total_q = cu.back() + (c.varlen ? 1 : 0);
  const std::vector<float> qv = random_values(rng, total_q * qrow, t), kv = random_values(rng, c.batch * c.seqlen_k * krow, t),
                           vv = random_values(rng, kv.size(), t);
  std::vector<float> k_cache = kv, v_cache = vv;
  Shape kv_shape{c.batch, c.seqlen_k, c.heads_kv, c.head_dim};
  PagedCache pages;
  if (c.cache_page_size > 0) {
    pages = make_paged_cache(kv, vv, c.batch, c.seqlen_k, krow, lengths, c.cache_page_size, rng, NAN);
    k_cache = pages.k, v_cache = pages.v;
    kv_shape = {pages.num_pages, c.cache_page_size, c.heads_kv, c.head_dim};
  }
  std::vector<std::uint16_t> q = to_bits(t, qv), k = to_bits(t, k_cache), v = to_bits(t, v_cache), o(q.size(), 0xffff);
  std::vector<float> lse(static_cast<std::size_t>(c.heads_q * total_q), NAN);
  const auto index = [](std::vector<int>& x, std::int64_t rows, std::int64_t columns = 0) {
    Tensor r = Tensor::contiguous(x.data(), DType::i32, {rows, std::max<std::int64_t>(columns, 1), 1, 1});
    r.rank = columns > 0 ? 2 : 1;
    return r;
  };
  ForwardArgs fa;
  if (c.varlen) {
    fa.q = Tensor::contiguous3(q.data(), t, {total_q, c.heads_q, c.head_dim});
    fa.o = Tensor::contiguous3(o.data(), t, {total_q, c.heads_q, c.head_dim});
    fa.lse = Tensor::contiguous(lse.data(), DType::f32, {c.heads_q, total_q, 1, 1});
    fa.lse.rank = 2;
    fa.varlen.cu_seqlens_q = index(cu, c.batch + 1);
    fa.varlen.max_seqlen_q = c.seqlen_q;
  } else {
    fa.q = Tensor::contiguous(q.data(), t, {c.batch, c.seqlen_q, c.heads_q, c.head_dim});
    fa.o = Tensor::contiguous(o.data(), t, {c.batch, c.seqlen_q, c.heads_q, c.head_dim});
    fa.lse = Tensor::contiguous3(lse.data(), DType::f32, {c.batch, c.heads_q, c.seqlen_q});
  }
  fa.k = Tensor::contiguous(k.data(), t, kv_shape);
  fa.v = Tensor::contiguous(v.data(), t, kv_shape);
  if (c.cache_page_size > 0) fa.block_table = index(pages.table, c.batch, pages.max_pages);
  fa.seqused_k = index(lengths, c.batch);
  fa.options.causal = c.causal;
  fa.options.window_left = c.window_left;
  fa.options.window_right = c.window_right;
  fa.options.softcap = c.softcap;
  // Validated as a GPU call would be (the offsets are not read there), planned for sm_80.
  for (Tensor* x : {&fa.q, &fa.k, &fa.v, &fa.o, &fa.lse, &fa.block_table, &fa.seqused_k, &fa.varlen.cu_seqlens_q})
    x->device = 0;
  const Problem p = validate_forward(fa);
  const std::vector<KernelSpec> specs = select_forward_kernels(problem_key(p), c.arch);
  const int splits = split_count(p, specs, 132);
  EXPECT_GE(splits, c.min_splits);
  std::vector<float> workspace(forward_workspace_bytes(p, splits) / sizeof(float), NAN);
  run_plan(plan_forward(fa, p, specs, splits, workspace.data()));

  // The oracles' problem: the dense cache's rows, its heads and the resolved options.
  Problem dense = p;
  dense.seqlen_k = c.seqlen_k;
  dense.varlen = dense.paged = dense.has_seqused_k = false;
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const cpu::Fp64Outputs ref = packed_kv_cache_oracle(dense, {qv.begin(), qv.end()}, {kv.begin(), kv.end()},
                                                      {vv.begin(), vv.end()}, cu, total_q, lengths, threads);
  const std::vector<float> pt = packed_kv_cache_pt(dense, qv, kv, vv, cu, total_q, lengths, threads);
  const std::int64_t first = cu.front() * qrow, end = cu.back() * qrow;
  std::vector<float> out(static_cast<std::size_t>(end - first));
  for (std::int64_t i = first; i < end; ++i) out[i - first] = from_bits(t, o[i]);
  expect_rule("o", out, {ref.o.begin() + first, ref.o.begin() + end}, {pt.begin() + first, pt.begin() + end}, t,
              c.softcap > 0 ? 3.0 : 2.0);
  // lse in the packed order (heads_q, total_q); dense queries wrote (batch, heads_q, seqlen_q).
  std::vector<float> got;
  std::vector<double> want;
  for (int h = 0; h < c.heads_q; ++h)
    for (int b = 0; b < c.batch; ++b)
      for (int i = cu[b]; i < cu[b + 1]; ++i) {
        got.push_back(c.varlen ? lse[h * total_q + i] : lse[(b * c.heads_q + h) * c.seqlen_q + i - cu[b]]);
        want.push_back(ref.lse[h * total_q + i]);
      }
  expect_lse(got, want);
  EXPECT_TRUE(untouched(o, 0, first) && untouched(o, end))
      << "o written in rows no sequence owns";
}

class KernelEmulation : public ::testing::TestWithParam<EmulationCase> {};

TEST_P(KernelEmulation, ForwardBackwardMatchOracle) {
  const EmulationCase& c = GetParam();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 rng(seed);
  if (c.cache_page_size >= 0) return run_kv_cache(c, rng);
  if (c.varlen) return run_varlen(c, rng);
  const DType t = c.dtype;
  const Shape qs{c.batch, c.seqlen_q, c.heads_q, c.head_dim}, ks{c.batch, c.seqlen_k, c.heads_kv, c.head_dim};
  std::vector<std::uint16_t> qkv_st, q_st, k_st, v_st, o_st, do_st, dq_st, dk_st, dv_st;
  View q, k, v;
  if (c.packed_qkv) {
    const std::int64_t row = (c.heads_q + 2 * c.heads_kv) * c.head_dim;
    qkv_st.assign(c.batch * c.seqlen_q * row, 0xffff);
    const Shape st{c.seqlen_q * row, row, c.head_dim, 1};
    q = View{&qkv_st, 0, qs, st, t};
    k = View{&qkv_st, static_cast<std::int64_t>(c.heads_q) * c.head_dim, ks, st, t};
    v = View{&qkv_st, static_cast<std::int64_t>(c.heads_q + c.heads_kv) * c.head_dim, ks, st, t};
  } else {
    q = padded(q_st, qs, 8, t);
    k = padded(k_st, ks, 0, t);
    v = padded(v_st, ks, 16, t);
  }
  const View o = padded(o_st, qs, 8, t), dout = padded(do_st, qs, 0, t), dq = padded(dq_st, qs, 8, t),
             dk = padded(dk_st, ks, 0, t), dv = padded(dv_st, ks, 8, t);
  const std::vector<float> qv = random_values(rng, q.gather().size(), t), kv = random_values(rng, k.gather().size(), t),
                           vv = random_values(rng, v.gather().size(), t),
                           dov = random_values(rng, dout.gather().size(), t);
  q.scatter(qv);
  k.scatter(kv);
  v.scatter(vv);
  dout.scatter(dov);
  std::vector<float> lse(static_cast<std::size_t>(c.batch) * c.heads_q * c.seqlen_q, NAN);

  AttentionOptions opt;
  opt.causal = c.causal;
  opt.window_left = c.window_left;
  opt.window_right = c.window_right;
  opt.softcap = c.softcap;
  opt.deterministic = c.deterministic;
  const Tensor lse_t = Tensor::contiguous3(lse.data(), DType::f32, {c.batch, c.heads_q, c.seqlen_q});
  const ForwardArgs fa{q.tensor(), k.tensor(), v.tensor(), o.tensor(), lse_t, opt};
  const Problem p = validate_forward(fa);
  // The decode cases' split count is sized for an H200's SMs, so that they run with splits.
  constexpr int kSmCount = 132;
  const std::vector<KernelSpec> fwd_specs = select_forward_kernels(problem_key(p), c.arch);
  const int splits = split_count(p, fwd_specs, kSmCount);
  std::vector<float> fwd_workspace(forward_workspace_bytes(p, splits) / sizeof(float), NAN);
  if (c.min_splits > 1) {
    EXPECT_GE(splits, c.min_splits);
  }
  run_plan(plan_forward(fa, p, fwd_specs, splits, fwd_workspace.data()));

  BackwardArgs ba;
  ba.q = q.tensor();
  ba.k = k.tensor();
  ba.v = v.tensor();
  ba.o = o.tensor();
  ba.lse = lse_t;
  ba.dout = dout.tensor();
  ba.dq = dq.tensor();
  ba.dk = dk.tensor();
  ba.dv = dv.tensor();
  ba.options = opt;
  const Problem pb = validate_backward(ba);
  std::vector<float> workspace(backward_workspace_bytes(pb) / sizeof(float), NAN);
  run_plan(plan_backward(ba, pb, c.arch, workspace.data()));

  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<double> q64(qv.begin(), qv.end()), k64(kv.begin(), kv.end()), v64(vv.begin(), vv.end()),
      do64(dov.begin(), dov.end());
  const cpu::Fp64Outputs ref = cpu::standard_forward_f64(p, q64, k64, v64, threads);
  const cpu::Fp64Gradients grad = cpu::standard_backward_f64(p, q64, k64, v64, do64, threads);
  const PtResult pt = input_precision_attention(p, qv, kv, vv, dov, threads);
  const double factor = c.softcap > 0 ? 3.0 : 2.0;
  expect_rule("o", o.gather(), ref.o, pt.o, t, factor);
  expect_lse(lse, ref.lse);
  expect_rule("dq", dq.gather(), grad.dq, pt.dq, t, factor);
  expect_rule("dk", dk.gather(), grad.dk, pt.dk, t, factor);
  expect_rule("dv", dv.gather(), grad.dv, pt.dv, t, factor);
  // Padding between rows of the strided outputs is never written.
  std::vector<bool> inside(o_st.size(), false);
  o.each([&](std::int64_t at, std::int64_t) { inside[at] = true; });
  std::size_t touched = 0;
  for (std::size_t i = 0; i < o_st.size(); ++i) touched += !inside[i] && (o_st[i] != 0xffff || dq_st[i] != 0xffff);
  EXPECT_EQ(touched, 0u) << "o or dq written outside its view";
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelEmulation, ::testing::ValuesIn(emulation_cases()),
                         [](const ::testing::TestParamInfo<EmulationCase>& i) { return name_of(i.param); });

}  // namespace
}  // namespace flashgen::test
