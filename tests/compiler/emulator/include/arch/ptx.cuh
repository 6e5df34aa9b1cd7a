// Emulated arch/ptx.cuh for the CPU emulator: stands in for templates/arch/ptx.cuh (found first on
// the include path), same names and signatures, in C++ that follows the PTX ISA.
#pragma once

#include "sm80_emulator.h"
#include "arch/types.cuh"
#include "runtime/cpu/dtype_convert.h"

namespace flash {

inline float neg_inf() { return -INFINITY; }
inline float pos_inf() { return INFINITY; }

inline float f16_to_f32(u16 x) { return flashgen::cpu::half_bits_to_float(x); }
inline u16 f32_to_f16(float f) { return flashgen::cpu::float_to_half_bits(f); }
inline u16 f32_to_bf16(float f) { return flashgen::cpu::float_to_bf16_bits(f); }
inline u32 f32x2_to_f16x2(float lo, float hi) { return f32_to_f16(lo) | (static_cast<u32>(f32_to_f16(hi)) << 16); }
inline u32 f32x2_to_bf16x2(float lo, float hi) { return f32_to_bf16(lo) | (static_cast<u32>(f32_to_bf16(hi)) << 16); }
inline float exp2_fast(float x) { return std::exp2(x); }
inline float log2_fast(float x) { return std::log2(x); }

inline unsigned char* dynamic_smem() { return emu::cta().smem.data(); }
inline u32 smem_u32(const void* p) {
  return static_cast<u32>(static_cast<const unsigned char*>(p) - emu::cta().smem.data());
}

// Every shared-memory access is bounds-checked against the launch's dynamic size.
inline unsigned char* smem_at(u32 addr, u32 bytes) {
  std::vector<unsigned char>& s = emu::cta().smem;
  if (static_cast<std::size_t>(addr) + bytes > s.size() || addr % bytes != 0) {
    std::fprintf(stderr, "emulator: shared access of %u bytes at %u outside [0, %zu) or misaligned\n", bytes, addr,
                 s.size());
    std::abort();
  }
  return s.data() + addr;
}

inline void st_shared_u32(u32 addr, u32 v) { std::memcpy(smem_at(addr, 4), &v, 4); }
inline void st_shared_v4(u32 addr, uint4 v) { std::memcpy(smem_at(addr, 16), &v, 16); }
inline uint4 ld_shared_v4(u32 addr) {
  uint4 v;
  std::memcpy(&v, smem_at(addr, 16), 16);
  return v;
}
inline void st_shared_f32(u32 addr, float v) { std::memcpy(smem_at(addr, 4), &v, 4); }
inline void st_shared_v2_f32(u32 addr, float x, float y) {
  const float v[2] = {x, y};
  std::memcpy(smem_at(addr, 8), v, 8);
}
inline float2 ld_shared_v2_f32(u32 addr) {
  float2 v;
  std::memcpy(&v, smem_at(addr, 8), 8);
  return v;
}
inline float ld_shared_f32(u32 addr) {
  float v;
  std::memcpy(&v, smem_at(addr, 4), 4);
  return v;
}

inline u16 smem_u16(u32 addr) {
  u16 v;
  std::memcpy(&v, smem_at(addr, 2), 2);
  return v;
}

}  // namespace flash
