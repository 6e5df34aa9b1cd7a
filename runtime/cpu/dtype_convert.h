// fp16 / bf16 <-> float conversions with round-to-nearest-even, written with integer
// bit operations so that any host compiler builds them (nvcc's front end included).
// The CPU backend reads and writes every tensor through load_float / store_float;
// GPU tests use the same functions to build their references.
#pragma once

#include <bit>
#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa units of 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Keeps the low `shift` bits' worth of rounding: nearest, ties to even.
inline std::uint32_t shift_right_round_even(std::uint32_t value, int shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

inline std::uint16_t float_to_half_bits(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t magnitude = f & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN stays NaN (quiet), keeping the top payload bits
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u)  // >= 65520: halfway past 65504 rounds (to even) to infinity
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u)  // normal in fp16: rebias the exponent, round the mantissa
    return static_cast<std::uint16_t>(sign | shift_right_round_even(magnitude - (112u << 23), 13));
  if (magnitude <= 0x33000000u)  // <= 2^-25: rounds (ties to even) to zero
    return static_cast<std::uint16_t>(sign);
  // Subnormal in fp16: express the value in units of 2^-24.
  const std::uint32_t biased_exponent = magnitude >> 23;
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(sign |
                                    shift_right_round_even(significand, static_cast<int>(126 - biased_exponent)));
}

inline float bf16_bits_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_bf16_bits(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>(shift_right_round_even(f, 16));
}

// Element `index` (in elements, not bytes) of a buffer of dtype t, as float.
inline float load_float(const void* data, DType t, std::int64_t index) {
  switch (t) {
    case DType::f16:
      return half_bits_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::bf16:
      return bf16_bits_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::f32:
    case DType::i32:  // index tensors never hold attention values
      break;
  }
  return static_cast<const float*>(data)[index];
}

inline void store_float(void* data, DType t, std::int64_t index, float x) {
  switch (t) {
    case DType::f16:
      static_cast<std::uint16_t*>(data)[index] = float_to_half_bits(x);
      return;
    case DType::bf16:
      static_cast<std::uint16_t*>(data)[index] = float_to_bf16_bits(x);
      return;
    case DType::f32:
    case DType::i32:  // index tensors never hold attention values
      break;
  }
  static_cast<float*>(data)[index] = x;
}

// x rounded to the nearest value representable in t.
inline float round_to(DType t, float x) {
  switch (t) {
    case DType::f16:
      return half_bits_to_float(float_to_half_bits(x));
    case DType::bf16:
      return bf16_bits_to_float(float_to_bf16_bits(x));
    case DType::f32:
    case DType::i32:  // index tensors never hold attention values
      break;
  }
  return x;
}

// Unit roundoff u of t: rounding a normal number changes it by at most u relative.
constexpr double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16:
      return 0x1p-11;
    case DType::bf16:
      return 0x1p-8;
    case DType::f32:
    case DType::i32:  // index tensors never hold attention values
      break;
  }
  return 0x1p-24;
}

}  // namespace flashgen::cpu
