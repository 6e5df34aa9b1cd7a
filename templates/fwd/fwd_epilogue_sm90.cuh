// The warp-specialised forward's epilogue (sm_90a), per consumer warpgroup: O (already
// divided by l) rounded to 16 bits into the warpgroup's own rows of the staging tile `s_q`
// (the Q tile, whose last product reading them has retired, or the persistent kernel's O
// tile, or the V ring that no warpgroup reads any more), then to global by TMA stores, which
// clip rows past the sequence end and columns past the head dim; lse = m + log(l) straight
// from registers.
// Packed sequences end inside the tensor, where a TMA store would not clip: a warpgroup whose
// rows the sequence's end cuts stores them with its threads instead. When store() returns to
// the warpgroup's first thread, the staging rows have been read.
#pragma once

#include "arch/fence.cuh"
#include "arch/named_barrier.cuh"
#include "arch/tma.cuh"
#include "attention/offsets.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg>
struct FwdEpilogueSm90 {
  // `Tile` at s_q is the Q tile; warpgroup `wg` owns its rows 64 wg .. 64 wg + 63. The
  // warpgroup's named barrier `barrier` orders its shared-memory writes before the store.
  template <class Tile, int kDT>
  static __device__ __forceinline__ void store(const FlashAttentionParams& p, const typename Cfg::Offsets& off, u32 s_q,
                                               int h, int m0, int rows_q, const float (&o)[1][kDT][4],
                                               const float (&lse)[1][2], int wg, int barrier) {
    const int lane = threadIdx.x & 31;
    const int q_row0 = 64 * wg;
    const int warp_row0 = q_row0 + 16 * ((threadIdx.x >> 5) & 3);
    // O's own persistent tile: the previous tile's TMA store may still read these rows until
    // the storing thread's wait (at the end of this function) has returned. (Over the V ring,
    // the mainloop's barrier over every consumer has waited for that already.)
    if constexpr (Cfg::kPersistent && !Cfg::kOOverV) named_barrier_sync(barrier, 128);
    store_fragments<typename Cfg::Element, Tile, false>(s_q, o, warp_row0, 0, 1.0f, lane);
    const int g = lane >> 2;
    if (p.lse != nullptr && (lane & 3) == 0) {
      float* lse_row = p.lse + off.lse_row(h) + m0;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + g + 8 * hh;
        if (row < rows_q) lse_row[row] = lse[0][hh];
      }
    }
    if constexpr (!Cfg::Offsets::tma_store_clips()) {
      // Only a slice that the sequence's end cuts (the warpgroup's 64 rows are uniform here).
      if (rows_q - q_row0 < 64) {
        named_barrier_sync(barrier, 128);
        // Its 64-row slice of each 64-column block (rows are 128 bytes there).
        store_tile<Tile, 128, Cfg::kHeadDim, Cfg::kVecLoad>(off.o(h, m0 + q_row0), p.o_stride.row, s_q + q_row0 * 128,
                                                            rows_q - q_row0, threadIdx.x & 127);
        if constexpr (Cfg::kOOverV) named_barrier_sync(barrier, 128);  // every thread has read its rows
        return;
      }
    }
    fence_async_shared();  // the TMA store reads shared memory through the async proxy
    named_barrier_sync(barrier, 128);
    if ((threadIdx.x & 127) == 0) {
#pragma unroll
      for (int cb = 0; cb < Cfg::kHeadDimCols / 64; ++cb)
        tma_store_4d(&p.tma_o, s_q + cb * Tile::kBlockBytes + q_row0 * 128, 64 * cb, off.tma_q_row(m0 + q_row0), h,
                     off.tma_batch());
      tma_store_commit();
      tma_store_wait_read<0>();  // the CTA's shared memory must outlive the store's reads
    }
  }
};

}  // namespace flash
