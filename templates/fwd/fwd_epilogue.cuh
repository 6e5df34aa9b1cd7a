// The forward epilogue: O (already divided by l) from registers through shared memory to
// global with 16-byte stores, and lse = m + log(l) per query row.
#pragma once

#include "attention/offsets.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg>
struct FwdEpilogue {
  // `Tile` at s_o (the Q tile: every warp is done reading it) stages O. The warp's rows start
  // at warp_row0 of the tile, whose first query is m0.
  template <class Tile, int kRT, int kDT>
  static __device__ __forceinline__ void store(const FlashAttentionParams& p, const typename Cfg::Offsets& off, u32 s_o, int h,
                                               int m0, int rows_q, const float (&acc_o)[kRT][kDT][4],
                                               const float (&lse)[kRT][2], int warp_row0, int tid, int lane) {
    store_fragments<typename Cfg::Element, Tile, false>(s_o, acc_o, warp_row0, 0, 1.0f, lane);
    const int g = lane >> 2, t = lane & 3;
    if (p.lse != nullptr && t == 0) {
      float* lse_row = p.lse + off.lse_row(h) + m0;
#pragma unroll
      for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = warp_row0 + 16 * mt + g + 8 * hh;
          if (row < rows_q) lse_row[row] = lse[mt][hh];
        }
    }
    __syncthreads();
    store_tile<Tile, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(off.o(h, m0), p.o_stride.row, s_o, rows_q, tid);
  }
};

}  // namespace flash
