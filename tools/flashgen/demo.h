// Shared by the two halves of `flashgen demo`: the CPU comparison (demo.cpp) and
// the generated kernels (demo_kernels.cpp).
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

struct DemoOptions {
  std::int64_t batch = 2, seqlen = 1024, heads = 8, head_dim = 64;
  bool causal = true;
  DType dtype = DType::f32;
  std::uint64_t seed = 0;  // 0: drawn from std::random_device
  int threads = 0;
  bool kernels = true;  // also generate/compile (and, with a GPU, run) the kernels
};

// Generates and compiles the problem's forward and backward kernels (any machine:
// NVRTC needs no GPU) and prints each one's resources; with a GPU, runs them and
// compares with standard attention. Returns 0 on success.
int run_demo_kernels(const DemoOptions& d, std::uint64_t seed);

}  // namespace flashgen::cli
