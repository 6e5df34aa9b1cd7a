// 16-bit elements and their float conversions for the spec's dtype (kIsBf16 picks
// bf16 or fp16). Elements live in `u16` registers and memory; arithmetic is fp32.
namespace flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float to_float(u16 x) {
  if constexpr (kIsBf16) return __uint_as_float(static_cast<u32>(x) << 16);  // bf16 is the top half of an fp32
  else return f16_to_f32(x);
}

__device__ __forceinline__ u16 from_float(float f) {
  if constexpr (kIsBf16) return f32_to_bf16(f);
  else return f32_to_f16(f);
}

// Two floats rounded into one 32-bit register: `lo` in bits 0..15, `hi` in 16..31.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  if constexpr (kIsBf16) return f32x2_to_bf16x2(lo, hi);
  else return f32x2_to_f16x2(lo, hi);
}

// tanh accurate to a few fp32 ulps in absolute terms (tanh.approx is ~2^-11 relative,
// too coarse once multiplied by the cap): tanh(x) = 1 - 2 / (e^{2x} + 1).
__device__ __forceinline__ float tanh_accurate(float x) {
  const float e = exp2_fast(2.0f * kLog2e * x);
  return 1.0f - 2.0f / (e + 1.0f);
}

}  // namespace flash
