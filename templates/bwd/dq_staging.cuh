// dQ staged in shared memory for the TMA reductions of the warp-specialised dK/dV kernels:
// boxes of kFlashDqBoxCols fp32 columns (128 bytes) x kFlashDqBoxRows query rows, the box of
// the accumulator's map (runtime/tensor_maps.cpp), 128-byte swizzled there and here: 16-byte
// chunk c of row r lies at chunk c ^ (r % 8), so a warp's fragment stores (8 rows, the same
// 32 bytes of each) fall on every bank once per 128 bytes: two wavefronts per 8-byte store,
// the least for 256 bytes, without the padding an unswizzled tile needs.
#pragma once

#include "arch/ptx.cuh"
#include "params/attention_params.h"

namespace flash {

constexpr int kDqBoxBytes = kFlashDqBoxCols * kFlashDqBoxRows * 4;

// A warpgroup's dQ C fragments (kCols columns: kCols / 8 fragments per 16-query slice, the
// slice of warp_row0 (a multiple of 16) in its box rows) into the boxes box(j) of columns
// 32 j.. from the fragments' first column. box(j) is 1024-byte aligned (the swizzle's period).
template <int kCols, class Box>
__device__ __forceinline__ void stage_dq_fragments(const Box& box, const float (&dq)[kCols / 8][4], int warp_row0,
                                                   int lane) {
  static_assert(kFlashDqBoxCols == 32 && kFlashDqBoxRows % 16 == 0, "four 8-column fragments per 128-byte box row");
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = warp_row0 + g + 8 * hh;             // row % 8 == g
      const int chunk = (2 * (nt % 4) + (tq >> 1)) ^ g;  // columns 8 nt + 2 tq, 8 nt + 2 tq + 1
      st_shared_v2_f32(box(nt / 4) + row * 128 + chunk * 16 + 8 * (tq & 1), dq[nt][2 * hh], dq[nt][2 * hh + 1]);
    }
}

}  // namespace flash
