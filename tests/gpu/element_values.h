// 16-bit element values of the GPU tests: fp16/bf16 bits from floats and back, and fresh
// random inputs already representable in the dtype.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::test {

inline std::uint16_t to_bits(DType t, float x) {
  return t == DType::bf16 ? cpu::float_to_bf16_bits(x) : cpu::float_to_half_bits(x);
}
inline float from_bits(DType t, std::uint16_t b) {
  return t == DType::bf16 ? cpu::bf16_bits_to_float(b) : cpu::half_bits_to_float(b);
}
inline std::vector<std::uint16_t> to_bits(DType t, const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_bits(t, x[i]);
  return out;
}
inline std::vector<float> from_bits(DType t, const std::vector<std::uint16_t>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = from_bits(t, x[i]);
  return out;
}

// n values ~ N(0, stddev^2), rounded to t.
inline std::vector<float> random_values(std::mt19937& rng, std::size_t n, float stddev, DType t) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> out(n);
  for (float& x : out) x = cpu::round_to(t, dist(rng));
  return out;
}

}  // namespace flashgen::test
