// Warpgroup products (sm_90a) wider than one wgmma shape: a product split into the widest
// block-aligned wgmma parts whose accumulators are consecutive 8-column groups.
#pragma once

#include "arch/wgmma_sm90.cuh"

namespace flash {

// d (8 * kNT columns) += A.B with A in registers and B MN-major in `Tile`'s 64-column
// blocks, k rows k0..k0+15: the widest products that fit, block-aligned, so that widths
// such as 96 (64 + 32) or 224 (128 + 64 + 32) need no wgmma shape of their own. The parts'
// accumulators are consecutive 8-column groups of d: the layout of one 8 * kNT product.
template <bool kIsBf16, class Tile, int kNT, int kCol0 = 0>
__device__ __forceinline__ void wgmma_rs_mn_major(float (&d)[kNT][4], const u32 (&a)[4], u32 tile, int k0) {
  constexpr int kLeft = kNT * 8 - kCol0;
  if constexpr (kLeft > 0) {
    constexpr int kN = kLeft >= 256 ? 256 : kLeft >= 128 ? 128 : kLeft >= 64 ? 64 : 32;
    static_assert(kLeft >= 32 && kCol0 % 64 == 0, "wgmma column parts: widths are multiples of 32");
    using Part = float[kN / 8][4];
    Wgmma<kN, kIsBf16>::template rs<true>(*reinterpret_cast<Part*>(&d[kCol0 / 8]), a,
                                 desc_mn_major<Tile>(tile + (kCol0 / 64) * Tile::kBlockBytes, k0));
    wgmma_rs_mn_major<kIsBf16, Tile, kNT, kCol0 + kN>(d, a, tile, k0);
  }
}

}  // namespace flash
