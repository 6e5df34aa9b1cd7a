// 16-bit elements (bf16 or fp16, picked by kIsBf16) and their fp32 conversions.
// Elements live in `u16` registers and memory; arithmetic is fp32.
#pragma once

#include "arch/ptx.cuh"

namespace flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <bool kIsBf16>
struct Element16 {
  static __device__ __forceinline__ float to_float(u16 x) {
    if constexpr (kIsBf16) return __uint_as_float(static_cast<u32>(x) << 16);  // bf16 is the top half of an fp32
    else return f16_to_f32(x);
  }

  static __device__ __forceinline__ u16 from_float(float f) {
    if constexpr (kIsBf16) return f32_to_bf16(f);
    else return f32_to_f16(f);
  }

  // Two floats rounded into one 32-bit register: `lo` in bits 0..15, `hi` in 16..31.
  static __device__ __forceinline__ u32 pack2(float lo, float hi) {
    if constexpr (kIsBf16) return f32x2_to_bf16x2(lo, hi);
    else return f32x2_to_f16x2(lo, hi);
  }
};

}  // namespace flash
