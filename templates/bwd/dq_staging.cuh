// dQ staged in shared memory for the TMA reductions of the warp-specialised dK/dV kernels:
// boxes of kFlashDqBoxCols fp32 columns (128 bytes) x flash_dq_box_rows(block_m) query rows,
// the box of the accumulator's map (runtime/tensor_maps.cpp), 128-byte swizzled there and
// here: 16-byte chunk c of row r lies at chunk c ^ (r % 8). The columns are in the
// accumulator's fragment order (flash_dq_accum_position: each 8-column group's even columns,
// then its odd ones), which bwd_dq_convert reads back.
#pragma once

#include "arch/ptx.cuh"
#include "arch/wgmma_sm90.cuh"
#include "params/attention_params.h"

namespace flash {

// The bytes of a box of `rows` query rows.
constexpr int dq_box_bytes(int rows) { return kFlashDqBoxCols * rows * 4; }

// A warpgroup's dQ C fragments (kCols columns: kCols / 8 fragments per 16-query slice, the
// slice of warp_row0 (a multiple of 16) in its box rows) into the boxes box(j) of columns
// 32 j.. from the fragments' first column. box(j) is 1024-byte aligned (the swizzle's period).
//
// One stmatrix per fragment: it stores each of the four fp32 fragment values as an 8 x 8
// matrix of 16-bit pairs, so value e of lane (g, tq) lands in row g (+ 8 for e >= 2) at the
// 4-byte slot tq of a 16-byte chunk: the fragment's even columns 2 tq fill one chunk, its odd
// columns the next (the fragment order). Each matrix's 8 rows are 8 distinct chunks after the
// swizzle (^ row % 8), all 32 banks: one wavefront per matrix. (Stored as they come, pairs of
// columns by 8-byte stores hit a 2-way bank conflict, and the fix by swapping fragments between
// lanes cost 2 selects per value: 48 of the d128 loop's 543 instructions went to this staging.)
template <int kCols, class Box>
__device__ __forceinline__ void stage_dq_fragments(const Box& box, const float (&dq)[kCols / 8][4], int warp_row0,
                                                   int lane) {
  static_assert(kFlashDqBoxCols == 32, "four 8-column fragments (eight 16-byte chunks) per 128-byte box row");
  const int matrix = lane >> 3;  // lane L addresses row L % 8 of matrix L / 8 = fragment value L / 8
  const int row = warp_row0 + (lane & 7) + 8 * (matrix >> 1);  // row % 8 == lane % 8
  // Fragment nt's chunk is (2 (nt % 4) + matrix % 2) ^ (row % 8) = 2 (nt % 4) ^ chunk0: one
  // offset per lane, its fragments' by one xor.
  const u32 at0 = row * 128 + 16 * ((matrix & 1) ^ (lane & 7));
#pragma unroll
  for (int nt = 0; nt < kCols / 8; ++nt) {
    const u32 r[4] = {__float_as_uint(dq[nt][0]), __float_as_uint(dq[nt][1]), __float_as_uint(dq[nt][2]),
                      __float_as_uint(dq[nt][3])};
    stmatrix_x4(box(nt / 4) + (at0 ^ (32 * (nt % 4))), r);
  }
}

// The same for dQ^T fragments (FA3's swapped product at 80 queries, which are no wgmma M):
// a warpgroup's C fragments of dQ^T = K^T.dS^T, rows = 64 head-dim columns of the part (warp_d0,
// a multiple of 16: the warp's 16), columns = kRows queries, into the boxes box(j) of the
// part's columns 32 j.. . Each value is its own 4-byte store. For a fragment value e the lanes
// (g, tq) hold column d = g (+ 8) and queries q = 2 tq (+ 1); in fragment order column d lies in
// chunk 2 (d % 32 / 8) + d % 2 at slot (d % 8) / 2, so after the swizzle (^ q % 8) the lanes'
// (d % 2, tq) name 8 distinct chunks and their (d % 8) / 2 the 4 slots of each: one wavefront,
// no conflict.
template <int kRows, class Box>
__device__ __forceinline__ void stage_dq_fragments_t(const Box& box, const float (&dqt)[kRows / 8][4], int warp_d0,
                                                     int lane) {
  static_assert(kFlashDqBoxCols == 32, "eight 16-byte chunks per 128-byte box row");
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int d = warp_d0 + g + 8 * hh;  // the part's column
    const int at = flash_dq_accum_position(d % kFlashDqBoxCols);
    const u32 base = box(d / kFlashDqBoxCols) + (at % 4) * 4;
    const int chunk = at / 4;
#pragma unroll
    for (int nt = 0; nt < kRows / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int q = 8 * nt + 2 * tq + e;
        st_shared_f32(base + q * 128 + ((chunk ^ (q % 8)) << 4), dqt[nt][2 * hh + e]);
      }
  }
}

}  // namespace flash
