// Emulated arch/wgmma_sm90.cuh (and the Wgmma shapes of wgmma_sm90_shapes.cuh) for the CPU
// emulator: stands in for the inline-PTX header (found first on the include path), same names and
// signatures, in C++ that follows the PTX ISA. The descriptors are the kernels' own
// (arch/wgmma_desc.cuh); a product runs when the warpgroup's 128 threads have all issued it, so
// commit, wait and the fences have nothing to do.
#pragma once

#include <optional>

#include "sm80_emulator.h"
#include "arch/mma_sm80.cuh"  // element_to_float, half_of
#include "arch/ptx.cuh"
#include "arch/wgmma_desc.cuh"

namespace flash {

namespace wgmma_emulated {

// Byte address of a 128-byte-swizzled operand element: the descriptor's start, leading and
// stride offsets (PTX ISA, "matrix descriptor format"), then the swizzle (address bits 4..6
// xor bits 7..9, the tiles being 1024-byte aligned).
struct Descriptor {
  u32 start, leading, stride;
  explicit Descriptor(u64 d)
      : start(static_cast<u32>(d & 0x3fff) << 4),
        leading(static_cast<u32>((d >> 16) & 0x3fff) << 4),
        stride(static_cast<u32>((d >> 32) & 0x3fff) << 4) {
    if (((d >> 62) & 3) != 1) {
      std::fprintf(stderr, "emulator: wgmma descriptor without the 128-byte swizzle\n");
      std::abort();
    }
  }
  static u32 swizzle(u32 a) { return a ^ (((a >> 7) & 7) << 4); }
  // K-major: row r (of M or N), k-column k of the k-step.
  u32 k_major(int r, int k) const { return swizzle(start + (r / 8) * stride + (r % 8) * 128 + 2 * k); }
  // MN-major: k-row k of the k-step, column mn (contiguous), 64-column blocks `leading` apart.
  u32 mn_major(int k, int mn) const {
    return swizzle(start + (mn / 64) * leading + (k / 8) * stride + (k % 8) * 128 + 2 * (mn % 64));
  }
};

template <bool kIsBf16>
inline float at(u32 addr) {
  return element_to_float<kIsBf16>(smem_u16(addr));
}

// d (this thread's C fragment of the 64 x N block) (+)= A.B for one k-step of 16: A from the
// warpgroup's registers (a_regs, the mma.sync A-fragment layout per warp) or shared memory.
template <int N, bool kIsBf16, bool kTransA, bool kTransB>
inline void product(float (&d)[N / 8][4], const u32* a_regs, u64 a_desc, u64 b_desc, int accumulate) {
  emu::Cta::Warpgroup& g = emu::current_warpgroup();
  const int t = emu::thread_index() % 128;
  if (a_regs != nullptr)
    for (int i = 0; i < 4; ++i) g.a[t][i] = a_regs[i];
  emu::warpgroup_sync();
  const std::optional<Descriptor> a = a_regs != nullptr ? std::nullopt : std::optional<Descriptor>(a_desc);
  const Descriptor b(b_desc);
  const int w = t / 32, l = t % 32;
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * w + l / 4 + 8 * (e / 2), col = 8 * j + 2 * (l % 4) + e % 2;
      float sum = accumulate ? d[j][e] : 0.0f;
      for (int k = 0; k < 16; ++k) {
        float av;
        if (a_regs != nullptr) {  // A(r, k) of warp r / 16: lane 4 (r % 8) + (k % 8) / 2, register (r % 16) / 8 + 2 (k / 8)
          const int r = row % 16;
          av = half_of<kIsBf16>(g.a[32 * (row / 16) + 4 * (r % 8) + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2);
        } else {
          av = at<kIsBf16>(kTransA ? a->mn_major(k, row) : a->k_major(row, k));
        }
        const float bv = at<kIsBf16>(kTransB ? b.mn_major(k, col) : b.k_major(col, k));
        sum += av * bv;
      }
      d[j][e] = sum;
    }
  emu::warpgroup_sync();
}

}  // namespace wgmma_emulated

template <int N, bool kIsBf16>
struct Wgmma {
  template <bool kTransA, bool kTransB>
  static void ss(float (&d)[N / 8][4], u64 a, u64 b, int accumulate) {
    wgmma_emulated::product<N, kIsBf16, kTransA, kTransB>(d, nullptr, a, b, accumulate);
  }
  template <bool kTransB>
  static void rs(float (&d)[N / 8][4], const u32 (&a)[4], u64 b, int accumulate = 1) {
    wgmma_emulated::product<N, kIsBf16, false, kTransB>(d, a, 0, b, accumulate);
  }
};

// stmatrix: only the warp-specialised kernels store by it, and those need TMA and mbarriers,
// which the emulator does not have: declared for the headers, fatal if reached.
[[noreturn]] inline void stmatrix_not_emulated() {
  std::fprintf(stderr, "emulator: stmatrix is not emulated (a warp-specialised kernel?)\n");
  std::abort();
}
inline void stmatrix_x4(u32, const u32 (&)[4]) { stmatrix_not_emulated(); }
inline void stmatrix_x4_trans(u32, const u32 (&)[4]) { stmatrix_not_emulated(); }

inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int kPending>
inline void wgmma_wait() {}
inline void wgmma_fence_operand(float&) {}
inline void wgmma_fence_operand(u32&) {}
template <class T, int N>
inline void wgmma_fence_operand(T (&)[N]) {}

}  // namespace flash
