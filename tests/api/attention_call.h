// Random, valid argument sets for both passes, for tests that then break one thing
// and check that validation names it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "flashgen/flashgen.h"
#include "flashgen/flashgen.hpp"
#include "tests/test_seed.h"

namespace flashgen::test {

struct Geometry {
  std::int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 1;
  DType dtype = DType::f32;
  int device = kCpu;
};

// Every argument either pass takes; forward() and backward() pick theirs.
struct AttentionCall {
  Geometry geometry;
  Tensor q, k, v, o, lse, dout, dq, dk, dv;
  AttentionOptions options;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  ForwardArgs forward() const;
  BackwardArgs backward() const;
};

// Odd sizes, GQA groups, batch >= 2. CPU: any dtype, head_dim 1..160; device: fp16/bf16 and
// head_dim a multiple of 8 in 32..256 (the GPU kernels take 1..256; these geometries keep the vector loads).
Geometry random_cpu_geometry(std::mt19937_64& rng);
Geometry random_device_geometry(std::mt19937_64& rng);

// Contiguous tensors for a geometry. CPU tensors own zeroed host memory; device tensors get
// distinct fake 16-byte aligned addresses, for validation only (never dereferenced).
class CallFactory {
 public:
  AttentionCall make(const Geometry& g);

 private:
  Tensor tensor(const Geometry& g, DType dtype, std::array<std::int64_t, 4> shape, int rank);
  std::vector<std::unique_ptr<std::uint64_t[]>> storage_;
  std::uintptr_t next_fake_address_ = std::uintptr_t{1} << 40;
};

// A fresh random seed per test, printed when the test fails.
struct RandomSource {
  ~RandomSource();
  const std::uint64_t seed = flashgen::test::test_seed();
  std::mt19937_64 rng{seed};
};

// The C view of a C++ tensor / argument set, written field by field (independent of c_api.cpp).
flashgen_tensor to_c(const Tensor& t);
flashgen_forward_args to_c_forward(const AttentionCall& call);
flashgen_backward_args to_c_backward(const AttentionCall& call);

}  // namespace flashgen::test
