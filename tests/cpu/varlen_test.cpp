// The CPU backend on packed variable-length sequences (runtime/cpu/varlen_attention.cpp):
// forward and backward through the Runtime against the same Runtime's dense calls on copies
// of one sequence's rows (bitwise: the same tiled code runs) and against the fp64 oracle;
// sequences without queries or keys, one-token ones, options per sequence, GQA, every dtype,
// NaN in the rows outside every sequence (never read) and output rows there never written;
// and what validation refuses, naming the argument.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_case.h"
#include "flashgen/flashgen.hpp"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/validate.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Rows before the first sequence and after the last one: cu_seqlens[0] > 0 and
// cu_seqlens[batch] < total.
constexpr std::int64_t kLeadRows = 2, kSpareRows = 3;

struct Packing {
  const char* name;
  std::vector<int> len_q, len_k;
  DType dtype = DType::f32;
  int heads_q = 4, heads_kv = 2, head_dim = 24;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  double magnitude = 1.0;  // inputs uniform in [-magnitude, magnitude]
};

void PrintTo(const Packing& c, std::ostream* os) { *os << c.name; }

// A (rows, heads, head_dim) tensor in `dtype` with a gap after each head and each row, NaN
// until written.
struct Rows {
  std::int64_t rows, heads, dim;
  std::vector<unsigned char> bytes;
  Tensor view;

  Rows(DType dtype, std::int64_t rows, std::int64_t heads, std::int64_t dim) : rows(rows), heads(heads), dim(dim) {
    const std::int64_t head_pitch = dim + 1, row_pitch = heads * head_pitch + 2;
    bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(rows * row_pitch, 1)) * size_of(dtype));
    view.data = bytes.data();
    view.dtype = dtype;
    view.rank = 3;
    view.shape = {rows, heads, dim, 1};
    view.stride = {row_pitch, head_pitch, 1, 1};
    poison();
  }
  std::int64_t elements() const { return static_cast<std::int64_t>(bytes.size() / size_of(view.dtype)); }
  std::int64_t offset(std::int64_t r, std::int64_t h, std::int64_t d) const {
    return r * view.stride[0] + h * view.stride[1] + d;
  }
  void poison() {
    for (std::int64_t i = 0; i < elements(); ++i) cpu::store_float(bytes.data(), view.dtype, i, kNaN);
  }
  // Rows [begin, begin + n) in (n, heads, head_dim) order.
  std::vector<double> read(std::int64_t begin, std::int64_t n) const {
    std::vector<double> out;
    for (std::int64_t r = begin; r < begin + n; ++r)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < dim; ++d) out.push_back(cpu::load_float(bytes.data(), view.dtype, offset(r, h, d)));
    return out;
  }
  void write(std::int64_t begin, const std::vector<double>& values) {
    std::size_t i = 0;
    for (std::int64_t r = begin; i < values.size(); ++r)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < dim; ++d)
          cpu::store_float(bytes.data(), view.dtype, offset(r, h, d), static_cast<float>(values[i++]));
  }
  // Elements of the storage, gaps included, that are not NaN.
  std::int64_t written() const {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < elements(); ++i) n += !std::isnan(cpu::load_float(bytes.data(), view.dtype, i));
    return n;
  }
  // The whole tensor as a dense batch of one, (1, rows, heads, head_dim).
  Tensor dense() const {
    Tensor t = view;
    t.rank = 4;
    t.shape = {1, rows, heads, dim};
    t.stride = {rows * view.stride[0], view.stride[0], view.stride[1], 1};
    return t;
  }
};

Tensor index_tensor(std::vector<std::int32_t>& v) {
  Tensor t = Tensor::contiguous(v.data(), DType::i32, {static_cast<std::int64_t>(v.size()), 1, 1, 1});
  t.rank = 1;
  return t;
}

Tensor lse_tensor(std::vector<float>& lse, std::int64_t heads, std::int64_t columns, std::int64_t batch = 0) {
  if (batch > 0) return Tensor::contiguous3(lse.data(), DType::f32, {batch, heads, columns});
  Tensor t = Tensor::contiguous(lse.data(), DType::f32, {heads, columns, 1, 1});
  t.rank = 2;
  return t;
}

// Offsets of sequences of the given lengths after kLeadRows rows.
std::vector<std::int32_t> offsets(const std::vector<int>& lengths) {
  std::vector<std::int32_t> cu{static_cast<std::int32_t>(kLeadRows)};
  for (int n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

// One packed problem: its tensors, NaN outside the sequences' rows.
struct Packed {
  Packing c;
  std::vector<std::int32_t> cu_q, cu_k;
  std::int64_t total_q, total_k, batch;
  Rows q, k, v, o, dout, dq, dk, dv;
  std::vector<float> lse;  // (heads_q, total_q)

  Packed(const Packing& c, std::mt19937_64& rng)
      : c(c),
        cu_q(offsets(c.len_q)),
        cu_k(offsets(c.len_k)),
        total_q(cu_q.back() + kSpareRows),
        total_k(cu_k.back() + kSpareRows),
        batch(static_cast<std::int64_t>(c.len_q.size())),
        q(c.dtype, total_q, c.heads_q, c.head_dim),
        k(c.dtype, total_k, c.heads_kv, c.head_dim),
        v(c.dtype, total_k, c.heads_kv, c.head_dim),
        o(c.dtype, total_q, c.heads_q, c.head_dim),
        dout(c.dtype, total_q, c.heads_q, c.head_dim),
        dq(c.dtype, total_q, c.heads_q, c.head_dim),
        dk(c.dtype, total_k, c.heads_kv, c.head_dim),
        dv(c.dtype, total_k, c.heads_kv, c.head_dim),
        lse(static_cast<std::size_t>(c.heads_q * total_q), kNaN) {
    std::uniform_real_distribution<double> uniform(-c.magnitude, c.magnitude);
    const auto fill = [&](Rows& t, const std::vector<std::int32_t>& cu) {
      std::vector<double> values(static_cast<std::size_t>((cu.back() - cu.front()) * t.heads * t.dim));
      for (double& x : values) x = uniform(rng);
      t.write(cu.front(), values);
    };
    fill(q, cu_q);
    fill(dout, cu_q);
    fill(k, cu_k);
    fill(v, cu_k);
  }

  AttentionOptions options() const {
    AttentionOptions o;
    o.causal = c.causal;
    o.window_left = c.window_left;
    o.window_right = c.window_right;
    o.softcap = c.softcap;
    return o;
  }
  PackedSequences varlen() {
    PackedSequences s;
    s.cu_seqlens_q = index_tensor(cu_q);
    s.cu_seqlens_k = index_tensor(cu_k);
    s.max_seqlen_q = std::max(1, *std::max_element(c.len_q.begin(), c.len_q.end()));
    s.max_seqlen_k = std::max(1, *std::max_element(c.len_k.begin(), c.len_k.end()));
    return s;
  }
  ForwardArgs forward_args() {
    ForwardArgs a;
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = o.view;
    a.lse = lse_tensor(lse, c.heads_q, total_q);
    a.options = options();
    a.varlen = varlen();
    return a;
  }
  BackwardArgs backward_args() {
    BackwardArgs a;
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = o.view, a.dout = dout.view;
    a.dq = dq.view, a.dk = dk.view, a.dv = dv.view;
    a.lse = lse_tensor(lse, c.heads_q, total_q);
    a.options = options();
    a.varlen = varlen();
    return a;
  }
  // Columns [begin, begin + n) of lse in (heads_q, n) order.
  std::vector<double> lse_columns(std::int64_t begin, std::int64_t n) const {
    std::vector<double> out;
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t i = begin; i < begin + n; ++i) out.push_back(lse[static_cast<std::size_t>(h * total_q + i)]);
    return out;
  }
  // The oracle's Problem of sequence b as a dense batch of one (attention_case's make_problem).
  Problem dense_problem(std::int64_t b) const {
    Case one;
    one.shape = {1, c.len_q[b], c.len_k[b], c.heads_q, c.heads_kv, c.head_dim};
    one.options = options();
    one.dtype = c.dtype;
    return make_problem(one);
  }
};

// Rows [begin, begin + n) of t, copied into a tensor of their own.
Rows copy_rows(const Rows& t, std::int64_t begin, std::int64_t n) {
  Rows out(t.view.dtype, n, t.heads, t.dim);
  out.write(0, t.read(begin, n));
  return out;
}

void expect_same(const char* what, std::int64_t b, const std::vector<double>& got, const std::vector<double>& want) {
  const Difference d = compare(got, want);
  EXPECT_EQ(d.max_abs, 0.0) << what << " of sequence " << b << " differs at element " << d.worst << ": "
                            << (d.worst >= 0 && d.worst < static_cast<std::int64_t>(got.size()) ? got[d.worst] : NAN)
                            << " vs " << (d.worst >= 0 && d.worst < static_cast<std::int64_t>(want.size()) ? want[d.worst] : NAN);
}

std::vector<double> filled(std::int64_t n, double value) { return std::vector<double>(static_cast<std::size_t>(n), value); }

// Output rows outside every sequence are never written; lse columns there neither.
void expect_nothing_written_outside(const Packed& x) {
  const std::int64_t rows_q = x.cu_q.back() - x.cu_q.front(), rows_k = x.cu_k.back() - x.cu_k.front();
  const std::int64_t hq = x.c.heads_q, hkv = x.c.heads_kv, d = x.c.head_dim;
  EXPECT_EQ(x.o.written(), rows_q * hq * d) << "o written outside the sequences' rows";
  EXPECT_EQ(x.dq.written(), rows_q * hq * d) << "dq written outside the sequences' rows";
  EXPECT_EQ(x.dk.written(), rows_k * hkv * d) << "dk written outside the sequences' rows";
  EXPECT_EQ(x.dv.written(), rows_k * hkv * d) << "dv written outside the sequences' rows";
  const std::int64_t lse_written = std::count_if(x.lse.begin(), x.lse.end(), [](float e) { return !std::isnan(e); });
  EXPECT_EQ(lse_written, rows_q * hq) << "lse written outside the sequences' columns";
}

const double kNegInf = -std::numeric_limits<double>::infinity();

class VarlenCpu : public ::testing::TestWithParam<Packing> {};

// The Runtime's packed calls equal its dense calls on each sequence's rows, bit for bit, and
// the oracle within rounding.
TEST_P(VarlenCpu, MatchesDenseCallsPerSequenceAndTheOracle) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  Packed x(GetParam(), rng);
  const Packing& c = x.c;
  Runtime rt;
  rt.forward(x.forward_args());
  rt.backward(x.backward_args());
  expect_nothing_written_outside(x);

  const std::int64_t hq = c.heads_q, hkv = c.heads_kv, d = c.head_dim;
  for (std::int64_t b = 0; b < x.batch; ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b << ": " << c.len_q[b] << " queries, " << c.len_k[b] << " keys");
    const std::int64_t q0 = x.cu_q[b], k0 = x.cu_k[b], lq = c.len_q[b], lk = c.len_k[b];
    const std::vector<double> o = x.o.read(q0, lq), lse = x.lse_columns(q0, lq), dq = x.dq.read(q0, lq);
    const std::vector<double> dk = x.dk.read(k0, lk), dv = x.dv.read(k0, lk);
    if (lq == 0 || lk == 0) {  // dense calls take no empty tensors: what they stand for
      expect_same("o", b, o, filled(lq * hq * d, 0.0));
      expect_same("lse", b, lse, filled(lq * hq, kNegInf));
      expect_same("dq", b, dq, filled(lq * hq * d, 0.0));
      expect_same("dk", b, dk, filled(lk * hkv * d, 0.0));
      expect_same("dv", b, dv, filled(lk * hkv * d, 0.0));
      continue;
    }
    Rows sq = copy_rows(x.q, q0, lq), sk = copy_rows(x.k, k0, lk), sv = copy_rows(x.v, k0, lk);
    Rows so(c.dtype, lq, hq, d), sdout = copy_rows(x.dout, q0, lq), sdq(c.dtype, lq, hq, d);
    Rows sdk(c.dtype, lk, hkv, d), sdv(c.dtype, lk, hkv, d);
    std::vector<float> slse(static_cast<std::size_t>(hq * lq), kNaN);
    ForwardArgs f;
    f.q = sq.dense(), f.k = sk.dense(), f.v = sv.dense(), f.o = so.dense();
    f.lse = lse_tensor(slse, hq, lq, 1);
    f.options = x.options();
    rt.forward(f);
    BackwardArgs g;
    g.q = f.q, g.k = f.k, g.v = f.v, g.o = f.o, g.lse = f.lse, g.dout = sdout.dense();
    g.dq = sdq.dense(), g.dk = sdk.dense(), g.dv = sdv.dense();
    g.options = f.options;
    rt.backward(g);
    expect_same("o", b, o, so.read(0, lq));
    expect_same("lse", b, lse, {slse.begin(), slse.end()});
    expect_same("dq", b, dq, sdq.read(0, lq));
    expect_same("dk", b, dk, sdk.read(0, lk));
    expect_same("dv", b, dv, sdv.read(0, lk));

    const Problem p = x.dense_problem(b);
    const std::vector<double> qd = sq.read(0, lq), kd = sk.read(0, lk), vd = sv.read(0, lk);
    const cpu::Fp64Outputs ref = cpu::standard_forward_f64(p, qd, kd, vd);
    const cpu::Fp64Gradients grads = cpu::standard_backward_f64(p, qd, kd, vd, sdout.read(0, lq));
    expect_tiled_close(c.dtype, {o, lse, dq, dk, dv}, {ref.o, ref.lse, grads.dq, grads.dk, grads.dv});
  }
}

// cpu::varlen_forward/backward with Algorithm::standard: the oracle in the packed layout,
// the fp64 results rounded once to the outputs.
TEST_P(VarlenCpu, StandardAlgorithmIsTheOracle) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  Packed x(GetParam(), rng);
  const ForwardArgs f = x.forward_args();
  const BackwardArgs g = x.backward_args();
  cpu::varlen_forward(f, validate_forward(f), 2, cpu::Algorithm::standard);
  cpu::varlen_backward(g, validate_backward(g), 2, cpu::Algorithm::standard);
  expect_nothing_written_outside(x);
  const double u = cpu::unit_roundoff(x.c.dtype) + 0x1p-24;
  const double slack = x.c.dtype == DType::f16 ? 0x1p-24 : 1e-12;  // fp16's subnormals are 2^-24 apart
  for (std::int64_t b = 0; b < x.batch; ++b) {
    const std::int64_t q0 = x.cu_q[b], k0 = x.cu_k[b], lq = x.c.len_q[b], lk = x.c.len_k[b];
    if (lq == 0 || lk == 0) continue;  // MatchesDenseCallsPerSequenceAndTheOracle checks those
    SCOPED_TRACE(::testing::Message() << "sequence " << b);
    const Problem p = x.dense_problem(b);
    const std::vector<double> qd = x.q.read(q0, lq), kd = x.k.read(k0, lk), vd = x.v.read(k0, lk);
    const cpu::Fp64Outputs ref = cpu::standard_forward_f64(p, qd, kd, vd);
    const cpu::Fp64Gradients grads = cpu::standard_backward_f64(p, qd, kd, vd, x.dout.read(q0, lq));
    expect_close("o", x.o.read(q0, lq), ref.o, u, slack);
    expect_close("lse", x.lse_columns(q0, lq), ref.lse, 0x1p-24, 1e-12);
    expect_close("dq", x.dq.read(q0, lq), grads.dq, u, slack);
    expect_close("dk", x.dk.read(k0, lk), grads.dk, u, slack);
    expect_close("dv", x.dv.read(k0, lk), grads.dv, u, slack);
  }
}

// Lengths: odd ones, longer than a 64-row tile, one token, no queries, no keys, neither.
const std::vector<int> kLenQ{37, 0, 1, 70, 5, 0, 3, 9}, kLenK{53, 9, 0, 65, 5, 0, 1, 9};

INSTANTIATE_TEST_SUITE_P(
    Packings, VarlenCpu,
    ::testing::Values(Packing{"fp32", kLenQ, kLenK},
                      Packing{"fp32_causal", kLenQ, kLenK, DType::f32, 4, 2, 24, true},
                      Packing{"bf16_window", kLenQ, kLenK, DType::bf16, 4, 2, 24, false, 7, 3},
                      Packing{"fp16_causal_softcap", kLenQ, kLenK, DType::f16, 4, 2, 24, true, -1, -1, 5.0f, 2.0},
                      Packing{"bf16_causal_window_mqa", kLenQ, kLenK, DType::bf16, 4, 1, 40, true, 11},
                      Packing{"fp16_one_token_sequences", {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, DType::f16, 2, 2, 8},
                      Packing{"fp32_one_sequence_causal", {97}, {97}, DType::f32, 3, 1, 17, true}),
    [](const ::testing::TestParamInfo<Packing>& info) { return std::string(info.param.name); });

// Validation: one thing broken in a valid packed call, refused by the forward (and the
// backward where it applies) with the status and a message naming the argument; no output written.
enum Passes : unsigned { kForward = 1, kBackward = 2, kBoth = 3 };
struct Rejection {
  const char* name;
  Status status;
  unsigned passes;  // the calls that have the broken argument
  std::string (*mutate)(Packed& x, ForwardArgs& f, BackwardArgs& g);
};

// Applies `change` to both calls' arguments.
template <typename Change>
void both(ForwardArgs& f, BackwardArgs& g, Change change) {
  change(f);
  change(g);
}

const Rejection kRejections[] = {
    {"cu_seqlens_q_decreasing", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs&, BackwardArgs&) -> std::string {
       x.cu_q[2] = x.cu_q[1] - 1;
       return fmt::format("varlen.cu_seqlens_q: [2] = {} is below [1] = {}, expected non-decreasing offsets", x.cu_q[2],
                          x.cu_q[1]);
     }},
    {"cu_seqlens_q_negative", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs&, BackwardArgs&) -> std::string {
       x.cu_q[0] = -1;
       return "varlen.cu_seqlens_q: [0] is -1, expected >= 0";
     }},
    {"cu_seqlens_k_past_total", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs&, BackwardArgs&) -> std::string {
       x.cu_k.back() = static_cast<std::int32_t>(x.total_k + 1);
       return fmt::format("varlen.cu_seqlens_k: [{}] is {}, expected at most k: shape[0] (total_k) = {}", x.batch,
                          x.total_k + 1, x.total_k);
     }},
    {"sequence_longer_than_max_seqlen_q", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.max_seqlen_q = 4; });
       return fmt::format("varlen.cu_seqlens_q: sequence 2 has {} rows, expected at most varlen.max_seqlen_q = 4",
                          x.c.len_q[2]);
     }},
    {"max_seqlen_q_zero", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.max_seqlen_q = 0; });
       return "varlen.max_seqlen_q: is 0, expected >= 1";
     }},
    {"max_seqlen_k_negative", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.max_seqlen_k = -3; });
       return "varlen.max_seqlen_k: is -3, expected >= 1";
     }},
    {"cu_seqlens_k_missing", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_k = {}; });
       return "varlen.cu_seqlens_k: data is null while varlen.cu_seqlens_q is set";
     }},
    {"cu_seqlens_q_missing", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_q.data = nullptr; });
       return "varlen.cu_seqlens_q: data is null while varlen.cu_seqlens_k is set";
     }},
    {"max_seqlen_without_offsets", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_q = a.varlen.cu_seqlens_k = {}; });
       return fmt::format("varlen.max_seqlen_q/max_seqlen_k: are {}/{} without cu_seqlens, expected 0",
                          f.varlen.max_seqlen_q, f.varlen.max_seqlen_k);
     }},
    {"cu_seqlens_k_not_int32", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_k.dtype = DType::f32; });
       return "varlen.cu_seqlens_k: dtype is 0, expected int32 (3)";
     }},
    {"cu_seqlens_k_other_batch", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_k.shape[0] -= 1; });
       return fmt::format("varlen.cu_seqlens_k: shape[0] (batch + 1) is {}, expected {} like varlen.cu_seqlens_q",
                          x.batch, x.batch + 1);
     }},
    {"cu_seqlens_single_offset", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_q.shape[0] = a.varlen.cu_seqlens_k.shape[0] = 1; });
       return "varlen.cu_seqlens_q: shape[0] (batch + 1) is 1, expected >= 2";
     }},
    {"cu_seqlens_q_on_a_gpu", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.varlen.cu_seqlens_q.device = 0; });
       return "varlen.cu_seqlens_q: device is cuda:0, expected cpu like q";
     }},
    {"q_rank_4", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.q.rank = 4; });
       return "q: rank is 4, expected 3 (total_q, heads_q, head_dim)";
     }},
    {"dk_rank_4", Status::invalid_argument, kBackward,
     [](Packed&, ForwardArgs&, BackwardArgs& g) -> std::string {
       g.dk.rank = 4;
       return "dk: rank is 4, expected 3 (total_k, heads_kv, head_dim)";
     }},
    {"dv_rows", Status::invalid_argument, kBackward,
     [](Packed& x, ForwardArgs&, BackwardArgs& g) -> std::string {
       g.dv.shape[0] -= 1;
       return fmt::format("dv: shape[0] (total_k) is {}, expected {} like k", x.total_k - 1, x.total_k);
     }},
    {"k_head_dim", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.k.shape[2] -= 1; });
       return fmt::format("k: shape[2] (head_dim) is {}, expected {} like q", x.c.head_dim - 1, x.c.head_dim);
     }},
    {"heads_kv_not_a_divisor", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.k.shape[1] = a.v.shape[1] = 3; });
       return "k: shape[1] (heads_kv) is 3, expected a divisor of q's heads_q = 4";
     }},
    {"o_rows", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.o.shape[0] -= 1; });
       return fmt::format("o: shape[0] (total_q) is {}, expected {} like q", x.total_q - 1, x.total_q);
     }},
    {"lse_dense_rank", Status::invalid_argument, kBoth,
     [](Packed&, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.lse.rank = 3; });
       return "lse: rank is 3, expected 2 (heads_q, total_q)";
     }},
    {"lse_columns", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.lse.shape[1] -= 1; });
       return fmt::format("lse: shape[1] (total_q) is {}, expected {} like q", x.total_q - 1, x.total_q);
     }},
    {"lse_strided", Status::invalid_argument, kBoth,
     [](Packed& x, ForwardArgs& f, BackwardArgs& g) -> std::string {
       both(f, g, [](auto& a) { a.lse.stride[0] += 1; });
       return fmt::format("lse: strides are ({}, 1), expected contiguous ({}, 1)", x.total_q + 1, x.total_q);
     }},
    // Over a KV cache only the queries are packed (kv_cache_test.cpp runs them).
    {"cu_seqlens_k_with_block_table", Status::invalid_argument, kForward,
     [](Packed& x, ForwardArgs& f, BackwardArgs&) -> std::string {
       f.block_table = index_tensor(x.cu_k);
       return "varlen.cu_seqlens_k: is set with a KV cache (block_table or seqused_k), expected null";
     }},
    {"max_seqlen_k_with_seqused_k", Status::invalid_argument, kForward,
     [](Packed& x, ForwardArgs& f, BackwardArgs&) -> std::string {
       f.seqused_k = index_tensor(x.cu_k);
       f.varlen.cu_seqlens_k = {};
       return "varlen.max_seqlen_k: is 5 with a KV cache (block_table or seqused_k), expected 0";
     }},
    {"packed_keys_with_seqused_k", Status::invalid_argument, kForward,
     [](Packed& x, ForwardArgs& f, BackwardArgs&) -> std::string {
       f.seqused_k = index_tensor(x.cu_k);
       f.varlen.cu_seqlens_k = {};
       f.varlen.max_seqlen_k = 0;
       return "k: rank is 3, expected 4 (batch, seqlen_k, heads_kv, head_dim)";
     }},
};

class VarlenRejection : public ::testing::TestWithParam<Rejection> {};

TEST_P(VarlenRejection, NamesTheArgument) {
  std::mt19937_64 rng(fresh_seed());
  Packed x(Packing{"base", {3, 0, 5}, {4, 2, 5}}, rng);
  ForwardArgs f = x.forward_args();
  BackwardArgs g = x.backward_args();
  const std::string expected = GetParam().mutate(x, f, g);
  Runtime rt;
  const auto expect_refused = [&](const char* pass, const auto& call) {
    try {
      call();
      ADD_FAILURE() << pass << " accepted; expected \"" << expected << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), GetParam().status) << pass << ": " << e.what();
      EXPECT_THAT(e.what(), HasSubstr(expected)) << pass;
    }
  };
  if (GetParam().passes & kForward) expect_refused("forward", [&] { rt.forward(f); });
  if (GetParam().passes & kBackward) expect_refused("backward", [&] { rt.backward(g); });
  EXPECT_EQ(x.o.written() + x.dq.written() + x.dk.written() + x.dv.written(), 0) << "a refused call wrote an output";
}

INSTANTIATE_TEST_SUITE_P(Validation, VarlenRejection, ::testing::ValuesIn(kRejections),
                         [](const ::testing::TestParamInfo<Rejection>& info) { return std::string(info.param.name); });

// The backends' limits name q's dimensions in the packed layout (shape[2] is head_dim, the
// batch is counted by cu_seqlens_q).
TEST(VarlenLimits, NameThePackedDimensions) {
  std::mt19937_64 rng(fresh_seed());
  Packed x(Packing{"base", {3, 0, 5}, {4, 2, 5}, DType::bf16}, rng);
  const auto refusal = [](const ForwardArgs& a) -> std::string {
    try {
      validate_forward(a);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::unsupported) << e.what();
      return e.what();
    }
    return "accepted";
  };
  // Views of memory validation never reads (the limits come before the offsets are read).
  const auto with_head_dim = [&](std::int64_t dim, int device) {
    ForwardArgs a = x.forward_args();
    std::uintptr_t address = std::uintptr_t{1} << 44;
    for (Tensor* t : {&a.q, &a.k, &a.v, &a.o}) {
      t->shape[2] = dim;
      t->stride = {t->shape[1] * dim, dim, 1, 1};
      t->data = reinterpret_cast<void*>(address += std::uintptr_t{1} << 36);
    }
    for (Tensor* t : {&a.q, &a.k, &a.v, &a.o, &a.lse, &a.varlen.cu_seqlens_q, &a.varlen.cu_seqlens_k}) t->device = device;
    return a;
  };
  EXPECT_THAT(refusal(with_head_dim(1025, kCpu)), HasSubstr("q: shape[2] (head_dim) is 1025, expected 1..1024"));
  EXPECT_THAT(refusal(with_head_dim(264, 0)), HasSubstr("q: shape[2] (head_dim) is 264 on cuda:0, expected 1..256"));
  ForwardArgs a = with_head_dim(64, 0);
  a.lse.data = nullptr;
  a.varlen.cu_seqlens_q.shape[0] = a.varlen.cu_seqlens_k.shape[0] = 70000;
  EXPECT_THAT(refusal(a), HasSubstr("varlen.cu_seqlens_q: shape[0] - 1 (batch) is 69999 on cuda:0, expected at most 65535"));
}

}  // namespace
}  // namespace flashgen::test
