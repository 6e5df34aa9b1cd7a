// One attention training step through flashgen's C++ API on raw buffers: forward,
// loss = sum(o * w) (so dO = w), backward. On the CPU (host buffers, fp32) every gradient
// entry is checked against central finite differences of the loss; then the same kind of
// step runs on CUDA buffers (cuda_step.cpp) where a GPU is present; last a decode step over
// a paged KV cache (kv_cache_step.cpp), and an engine's prefill + decode loop, the decode steps
// in one CUDA graph (decode_loop.cpp). Exits non-zero if a check fails.
#include <flashgen/flashgen.hpp>

#include "cuda_step.h"
#include "decode_loop.h"
#include "kv_cache_step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 1, kSeqQ = 5, kSeqK = 7, kHeads = 2, kDim = 8;

struct Problem {
  std::vector<float> q, k, v, w;
};

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

flashgen::Tensor view(std::vector<float>& x, std::int64_t seq) {
  return flashgen::Tensor::contiguous(x.data(), flashgen::DType::f32, {kBatch, seq, kHeads, kDim});
}

// Forward pass; returns the loss sum(o * w) and fills o and lse.
double loss(flashgen::Runtime& rt, Problem& p, std::vector<float>& o, std::vector<float>& lse) {
  flashgen::ForwardArgs args;
  args.q = view(p.q, kSeqQ);
  args.k = view(p.k, kSeqK);
  args.v = view(p.v, kSeqK);
  args.o = view(o, kSeqQ);
  args.lse = flashgen::Tensor::contiguous3(lse.data(), flashgen::DType::f32, {kBatch, kHeads, kSeqQ});
  args.options.causal = true;
  rt.forward(args);
  double sum = 0;
  for (std::size_t i = 0; i < o.size(); ++i) sum += double(o[i]) * p.w[i];
  return sum;
}

// Largest |finite difference - analytic gradient| over every entry of `x`.
double check_gradient(flashgen::Runtime& rt, Problem& p, std::vector<float>& x, const std::vector<float>& grad) {
  const float eps = 1e-2f;
  std::vector<float> o(p.q.size()), lse(kBatch * kHeads * kSeqQ);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = loss(rt, p, o, lse);
    x[i] = saved - eps;
    const double down = loss(rt, p, o, lse);
    x[i] = saved;
    worst = std::max(worst, std::abs((up - down) / (2 * eps) - grad[i]));
  }
  return worst;
}

}  // namespace

int main() {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  const std::size_t nq = kBatch * kSeqQ * kHeads * kDim, nk = kBatch * kSeqK * kHeads * kDim;
  Problem p{random_vector(nq, rng), random_vector(nk, rng), random_vector(nk, rng), random_vector(nq, rng)};

  try {
    flashgen::Runtime rt;
    const float nan = std::nanf("");
    std::vector<float> o(nq, nan), lse(kBatch * kHeads * kSeqQ, nan);
    std::vector<float> dq(nq, nan), dk(nk, nan), dv(nk, nan);
    const double l = loss(rt, p, o, lse);

    flashgen::BackwardArgs args;
    args.q = view(p.q, kSeqQ);
    args.k = view(p.k, kSeqK);
    args.v = view(p.v, kSeqK);
    args.o = view(o, kSeqQ);
    args.lse = flashgen::Tensor::contiguous3(lse.data(), flashgen::DType::f32, {kBatch, kHeads, kSeqQ});
    args.dout = view(p.w, kSeqQ);  // d(sum(o * w))/do = w
    args.dq = view(dq, kSeqQ);
    args.dk = view(dk, kSeqK);
    args.dv = view(dv, kSeqK);
    args.options.causal = true;
    rt.backward(args);

    const double err = std::max({check_gradient(rt, p, p.q, dq), check_gradient(rt, p, p.k, dk),
                                 check_gradient(rt, p, p.v, dv)});
    std::printf("flashgen %s: loss %.6f, max |finite difference - gradient| %.2e (seed %u)\n",
                flashgen::version(), l, err, seed);
    if (!(err < 1e-3)) {
      std::fprintf(stderr, "gradients disagree with finite differences\n");
      return 1;
    }
    if (!cuda_training_step(rt, seed)) {
      std::fprintf(stderr, "GPU results disagree with the CPU backend (seed %u)\n", seed);
      return 1;
    }
    if (!paged_decode_step(rt, seed)) {
      std::fprintf(stderr, "attention over the paged cache disagrees with the dense forward (seed %u)\n", seed);
      return 1;
    }
    if (!decode_loop(rt, seed)) {
      std::fprintf(stderr, "the GPU decode loop disagrees with the CPU backend (seed %u)\n", seed);
      return 1;
    }
  } catch (const flashgen::Error& e) {
    std::fprintf(stderr, "flashgen error (%s): %s\n", flashgen::to_string(e.status()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
