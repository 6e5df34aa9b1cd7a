// dQ staged in shared memory for the TMA reductions of the warp-specialised dK/dV kernels:
// boxes of kFlashDqBoxCols fp32 columns (128 bytes) x flash_dq_box_rows(block_m) query rows,
// the box of the accumulator's map (runtime/tensor_maps.cpp), 128-byte swizzled there and
// here: 16-byte chunk c of row r lies at chunk c ^ (r % 8). An 8-byte store is served a
// half-warp per wavefront, so each half-warp (4 rows, lanes g = 0..3 of each) must hit 16
// distinct 8-byte slots: one wavefront per half-warp, two per store, the least for 256 bytes,
// with no padding.
#pragma once

#include "arch/ptx.cuh"
#include "params/attention_params.h"

namespace flash {

// The bytes of a box of `rows` query rows.
constexpr int dq_box_bytes(int rows) { return kFlashDqBoxCols * rows * 4; }

// A warpgroup's dQ C fragments (kCols columns: kCols / 8 fragments per 16-query slice, the
// slice of warp_row0 (a multiple of 16) in its box rows) into the boxes box(j) of columns
// 32 j.. from the fragments' first column. box(j) is 1024-byte aligned (the swizzle's period).
//
// Why the lanes store different fragments: a fragment's lanes (g, tq) hold columns 2 tq, 2 tq + 1
// of row g, logical chunk 2 (nt % 4) + tq / 2. Stored fragment by fragment, a half-warp's chunks
// ^ g cover one group of four chunks twice (tq < 2 and tq >= 2 collide: a 2-way bank conflict,
// measured as ~270 extra wavefronts per work item of the d128 dK/dV kernel, Nsight Compute).
// So lanes with tq >= 2 store fragment nt ^ 2 instead (same box): their chunks lie in the other
// group of four, and each half-warp's 16 stores hit 16 distinct bank pairs.
template <int kCols, class Box>
__device__ __forceinline__ void stage_dq_fragments(const Box& box, const float (&dq)[kCols / 8][4], int warp_row0,
                                                   int lane) {
  static_assert(kFlashDqBoxCols == 32, "four 8-column fragments per 128-byte box row");
  constexpr int kFrags = kCols / 8;
  // A box's last fragments may lack their partner (kCols % 32 != 0): stored as they come.
  constexpr int kPaired = kFrags / 4 * 4;
  const int g = lane >> 2, tq = lane & 3;
  const bool upper = tq >= 2;  // this lane's columns lie in the fragment's second 16-byte chunk
#pragma unroll
  for (int nt = 0; nt < kFrags; ++nt) {
    const bool swap = upper && nt < kPaired;
    const int pair = nt < kPaired ? nt ^ 2 : nt;
    const int chunk = ((2 * (nt % 4) + (tq >> 1)) ^ (swap ? 4 : 0)) ^ g;  // the stored fragment's columns
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = warp_row0 + g + 8 * hh;  // row % 8 == g
      const float x = swap ? dq[pair][2 * hh] : dq[nt][2 * hh];
      const float y = swap ? dq[pair][2 * hh + 1] : dq[nt][2 * hh + 1];
      st_shared_v2_f32(box(nt / 4) + row * 128 + chunk * 16 + 8 * (tq & 1), x, y);
    }
  }
}

// The same for dQ^T fragments (FA3's swapped product at 80 queries, which are no wgmma M):
// a warpgroup's C fragments of dQ^T = K^T.dS^T, rows = 64 head-dim columns of the part (warp_d0,
// a multiple of 16: the warp's 16), columns = kRows queries, into the boxes box(j) of the
// part's columns 32 j.. . Each value is its own 4-byte store: for a fragment value e the lanes
// (g, tq) hold column d = g (+ 8) and queries 2 tq (+ 1), i.e. chunks (d / 4) ^ (q % 8) over two
// d-chunks and four q % 8 of one parity: 8 distinct chunks, d % 4 distinct banks within each,
// so every store is one wavefront with no conflict.
template <int kRows, class Box>
__device__ __forceinline__ void stage_dq_fragments_t(const Box& box, const float (&dqt)[kRows / 8][4], int warp_d0,
                                                     int lane) {
  static_assert(kFlashDqBoxCols == 32, "eight 16-byte chunks per 128-byte box row");
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int d = warp_d0 + g + 8 * hh;  // the part's column
    const u32 base = box(d / kFlashDqBoxCols) + (d % 4) * 4;
    const int chunk = (d % kFlashDqBoxCols) / 4;
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
