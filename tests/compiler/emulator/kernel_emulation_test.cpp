// The generated sm_80 kernels, run on the CPU emulator (sm80_emulator.h) through the
// same launch plans the GPU backend uses (runtime/launch_plan.h), against the fp64
// oracle with FlashAttention's rule. Catches indexing, masking, pipeline and layout
// bugs without a GPU; the gpu label checks the real hardware.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "attention_rule.h"
#include "emulation_cases.h"
#include "input_precision_reference.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/launch_plan.h"
#include "sm80_emulator.h"

namespace flashgen::test {
namespace {

using Shape = std::array<std::int64_t, 4>;

std::uint16_t to_bits(DType t, float x) {
  return t == DType::bf16 ? cpu::float_to_bf16_bits(x) : cpu::float_to_half_bits(x);
}
float from_bits(DType t, std::uint16_t b) {
  return t == DType::bf16 ? cpu::bf16_bits_to_float(b) : cpu::half_bits_to_float(b);
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
  return fmt::format("d{}_q{}_k{}_b{}_h{}x{}_{}{}{}{}{}{}", c.head_dim, c.seqlen_q, c.seqlen_k, c.batch, c.heads_q,
                     c.heads_kv, c.dtype == DType::bf16 ? "bf16" : "fp16", c.causal ? "_causal" : "",
                     c.window_left >= 0 || c.window_right >= 0 ? "_window" : "", c.softcap > 0 ? "_softcap" : "",
                     c.deterministic ? "_det" : "", c.packed_qkv ? "_packed" : "");
}

class KernelEmulation : public ::testing::TestWithParam<EmulationCase> {};

TEST_P(KernelEmulation, ForwardBackwardMatchOracle) {
  const EmulationCase& c = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 rng(seed);
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
  const std::vector<KernelSpec> fwd_specs = select_forward_kernels(problem_key(p), Arch::sm_80);
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
  run_plan(plan_backward(ba, pb, Arch::sm_80, workspace.data()));

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
