// Emulated arch/mma_sm80.cuh for the CPU emulator: stands in for templates/arch/mma_sm80.cuh (found first on
// the include path), same names and signatures, in C++ that follows the PTX ISA.
#pragma once

#include "sm80_emulator.h"
#include "arch/ptx.cuh"

namespace flash {

// Fragment layouts follow the PTX ISA: ldmatrix m8n8.x4(.trans) and mma.sync m16n8k16
// row.col with fp32 accumulate.
// Lane l receives from matrix j: row l/4, columns 2(l%4), 2(l%4)+1 (trans: of the transpose).
template <bool kTrans>
inline void ldmatrix_emulated(u32 (&r)[4], u32 addr) {
  emu::Cta::Warp& w = emu::current_warp();
  const int l = emu::lane();
  w.slot[l][0] = addr;
  emu::warp_sync();
  const int g = l / 4, t = l % 4;
  for (int j = 0; j < 4; ++j) {
    u16 lo, hi;
    if (kTrans) {
      lo = smem_u16(w.slot[8 * j + 2 * t][0] + 2 * g);
      hi = smem_u16(w.slot[8 * j + 2 * t + 1][0] + 2 * g);
    } else {
      lo = smem_u16(w.slot[8 * j + g][0] + 4 * t);
      hi = smem_u16(w.slot[8 * j + g][0] + 4 * t + 2);
    }
    r[j] = lo | (static_cast<u32>(hi) << 16);
  }
  emu::warp_sync();
}
inline void ldmatrix_x4(u32 (&r)[4], u32 addr) { ldmatrix_emulated<false>(r, addr); }
inline void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) { ldmatrix_emulated<true>(r, addr); }
// .x2 reads the addresses of lanes 0..15 only: lanes 16..31 pass any address.
inline void ldmatrix_x2_trans(u32 (&r)[2], u32 addr) {
  const int l = emu::lane();
  u32 all[4];
  ldmatrix_emulated<true>(all, l < 16 ? addr : 0u);
  r[0] = all[0];
  r[1] = all[1];
}

template <bool kIsBf16>
inline float element_to_float(u16 x) {
  return kIsBf16 ? flashgen::cpu::bf16_bits_to_float(x) : flashgen::cpu::half_bits_to_float(x);
}
template <bool kIsBf16>
inline float half_of(u32 reg, int which) { return element_to_float<kIsBf16>(static_cast<u16>(reg >> (16 * which))); }

// D = A (16x16, row) . B (16x8, col) + C. A(r, k): lane 4(r%8) + (k%8)/2, register (r/8) + 2(k/8),
// half k%2. B(k, n): lane 4n + (k%8)/2, register k/8, half k%2. C(r, n): lane 4(r%8) + n/2, element 2(r/8) + n%2.
template <bool kIsBf16>
inline void mma_16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  emu::Cta::Warp& w = emu::current_warp();
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) w.slot[l][i] = a[i];
  w.slot[l][4] = b0;
  w.slot[l][5] = b1;
  emu::warp_sync();
  const int g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float sum = c[e];
    for (int k = 0; k < 16; ++k) {
      const float av = half_of<kIsBf16>(w.slot[4 * (row % 8) + (k % 8) / 2][(row / 8) + 2 * (k / 8)], k % 2);
      const float bv = half_of<kIsBf16>(w.slot[4 * col + (k % 8) / 2][4 + k / 8], k % 2);
      sum += av * bv;
    }
    c[e] = sum;
  }
  emu::warp_sync();
}

}  // namespace flash
