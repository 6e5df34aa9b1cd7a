// `flashgen demo`: one random attention problem through the tiled CPU backend (the
// ledger algorithm) and through standard attention (materialised P), side by side:
// time, max differences, and the memory each keeps for the backward pass.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cpu/parallel_for.h"
#include "runtime/validate.h"
#include "tools/flashgen/commands.h"
#include "tools/flashgen/demo.h"

namespace flashgen::cli {
namespace {

// A contiguous tensor that owns its memory.
struct OwnedTensor {
  std::vector<unsigned char> bytes;
  Tensor view;
};

OwnedTensor make_tensor(DType dtype, std::array<std::int64_t, 4> shape) {
  OwnedTensor t;
  t.bytes.resize(static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3]) * size_of(dtype));
  t.view = Tensor::contiguous(t.bytes.data(), dtype, shape);
  return t;
}

OwnedTensor make_lse(std::int64_t batch, std::int64_t heads, std::int64_t seqlen) {
  OwnedTensor t;
  t.bytes.resize(static_cast<std::size_t>(batch * heads * seqlen) * sizeof(float));
  t.view = Tensor::contiguous3(t.bytes.data(), DType::f32, {batch, heads, seqlen});
  return t;
}

void fill_normal(const Tensor& t, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < t.numel(); ++i) cpu::store_float(t.data, t.dtype, i, normal(rng));
}

// The outputs of one backend.
struct Outputs {
  OwnedTensor o, lse, dq, dk, dv;
  double forward_seconds = 0, backward_seconds = 0;
};

template <class Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// max |a - b| over two contiguous tensors of equal shape; -inf == -inf counts as equal.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = cpu::load_float(a.data, a.dtype, i), y = cpu::load_float(b.data, b.dtype, i);
    worst = std::max(worst, x == y ? 0.0 : std::isnan(x - y) ? INFINITY : std::abs(x - y));
  }
  return worst;
}

double max_abs_finite(const Tensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double x = cpu::load_float(t.data, t.dtype, i);
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  }
  return m;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  for (; bytes >= 1024 && u < 4; ++u) bytes /= 1024;
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

int run_demo(const DemoOptions& d) {
  const std::uint64_t seed = d.seed != 0 ? d.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::array<std::int64_t, 4> shape{d.batch, d.seqlen, d.heads, d.head_dim};
  OwnedTensor q = make_tensor(d.dtype, shape), k = make_tensor(d.dtype, shape), v = make_tensor(d.dtype, shape);
  OwnedTensor dout = make_tensor(d.dtype, shape);
  for (const OwnedTensor* t : {&q, &k, &v, &dout}) fill_normal(t->view, rng);

  Outputs tiled, standard;
  for (Outputs* out : {&tiled, &standard}) {
    out->o = make_tensor(d.dtype, shape), out->dq = make_tensor(d.dtype, shape);
    out->dk = make_tensor(d.dtype, shape), out->dv = make_tensor(d.dtype, shape);
    out->lse = make_lse(d.batch, d.heads, d.seqlen);
  }
  const auto forward_args = [&](const Outputs& out) {
    ForwardArgs a;
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = out.o.view, a.lse = out.lse.view;
    a.options.causal = d.causal;
    return a;
  };
  const auto backward_args = [&](const Outputs& out) {
    BackwardArgs a;
    a.q = q.view, a.k = k.view, a.v = v.view, a.o = out.o.view, a.lse = out.lse.view, a.dout = dout.view;
    a.dq = out.dq.view, a.dk = out.dk.view, a.dv = out.dv.view;
    a.options.causal = d.causal;
    return a;
  };
  const int threads = cpu::resolve_threads(d.threads);
  const Problem p = validate_forward(forward_args(tiled));
  tiled.forward_seconds = seconds([&] { cpu::tiled_forward(forward_args(tiled), p, threads); });
  tiled.backward_seconds = seconds([&] {
    const BackwardArgs a = backward_args(tiled);
    cpu::tiled_backward(a, validate_backward(a), threads);
  });
  standard.forward_seconds = seconds([&] { cpu::standard_forward(forward_args(standard), p, threads); });
  standard.backward_seconds = seconds([&] {
    const BackwardArgs a = backward_args(standard);
    cpu::standard_backward(a, validate_backward(a), threads);
  });

  fmt::print("flashgen demo: exact attention on the CPU, tiled (the ledger) vs standard (materialised P)\n");
  fmt::print("  problem   batch {}, seqlen {}, heads {}, head_dim {}, {}, {}, seed {}, threads {}\n", d.batch, d.seqlen,
             d.heads, d.head_dim, d.causal ? "causal" : "not causal", to_string(d.dtype), seed, threads);
  fmt::print(
      "  time      tiled: forward {:.3f} s, backward {:.3f} s | standard (fp64): forward {:.3f} s, backward {:.3f} s\n",
      tiled.forward_seconds, tiled.backward_seconds, standard.forward_seconds, standard.backward_seconds);

  // fp32 agrees to ~1e-6 of the largest value; 16-bit outputs may differ by a rounding or two.
  const double tolerance = d.dtype == DType::f32 ? 1e-4 : 4 * cpu::unit_roundoff(d.dtype) + 1e-4;
  bool ok = true;
  std::string diffs;
  for (const auto& [name, member] : std::vector<std::pair<const char*, OwnedTensor Outputs::*>>{{"O", &Outputs::o},
                                                                                                {"lse", &Outputs::lse},
                                                                                                {"dQ", &Outputs::dq},
                                                                                                {"dK", &Outputs::dk},
                                                                                                {"dV", &Outputs::dv}}) {
    const double diff = max_abs_diff((tiled.*member).view, (standard.*member).view);
    const double scale = std::max(1e-30, max_abs_finite((standard.*member).view));
    ok = ok && diff <= tolerance * scale;
    diffs += fmt::format("  {} {:.2e}", name, diff);
  }
  fmt::print("  max |tiled - standard| {}   (allowed: {:.0e} of each tensor's max |value|)\n", diffs, tolerance);

  const double ledger_bytes = static_cast<double>(d.batch * d.heads * d.seqlen) * sizeof(float);
  const double p_bytes = static_cast<double>(d.batch * d.heads) * d.seqlen * d.seqlen * size_of(d.dtype);
  fmt::print("  kept for backward\n");
  fmt::print("    tiled     {:<46} {:>14} bytes ({})\n", "lse: batch*heads*seqlen_q fp32 values",
             static_cast<std::int64_t>(ledger_bytes), bytes_text(ledger_bytes));
  fmt::print("    standard  {:<46} {:>14} bytes ({})\n",
             fmt::format("P: batch*heads*seqlen_q*seqlen_k {} values", to_string(d.dtype)),
             static_cast<std::int64_t>(p_bytes), bytes_text(p_bytes));
  fmt::print("    ratio     the ledger is {:.0f}x smaller\n", p_bytes / ledger_bytes);
  fmt::print("  result    {}\n", ok ? "OK: tiled and standard attention agree" : "FAILED: differences above tolerance");
  const int kernels_rc = d.kernels ? run_demo_kernels(d, seed) : 0;
  return ok && kernels_rc == 0 ? 0 : 1;
}

}  // namespace

void register_demo(CLI::App& app) {
  auto options = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo",
                                 "Run a random attention problem through the tiled CPU backend and "
                                 "standard attention; compare results, time and backward memory");
  cmd->add_option("--batch", options->batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seqlen", options->seqlen, "sequence length (queries and keys)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--heads", options->heads, "attention heads")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--head-dim", options->head_dim, "head dimension")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--causal,!--no-causal", options->causal, "causal masking (default on)");
  auto dtype = std::make_shared<std::string>("fp32");
  cmd->add_option("--dtype", *dtype, "input and output dtype")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  cmd->add_option("--seed", options->seed, "random seed (0: a fresh one)")->capture_default_str();
  cmd->add_option("--threads", options->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_flag("--kernels,!--no-kernels", options->kernels,
                "also generate and compile the GPU kernels (and run them where a GPU is present)");
  cmd->callback([options, dtype] {
    options->dtype = *dtype == "fp16" ? DType::f16 : *dtype == "bf16" ? DType::bf16 : DType::f32;
    if (const int rc = run_demo(*options); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace flashgen::cli
