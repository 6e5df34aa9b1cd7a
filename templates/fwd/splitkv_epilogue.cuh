// The decode epilogue (split-KV forward): the key-slice warps of a row group computed the
// same rows over different keys; their outputs are merged by lse (attention/lse_merge.cuh)
// through shared memory and written, 8 columns per thread, either as the final O and lse
// (one split) or as this split's fp32 part for fwd_combine (params/attention_params.h,
// num_splits).
#pragma once

#include "attention/lse_merge.cuh"
#include "attention/offsets.cuh"
#include "attention/packed_rows.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg>
struct FwdSplitKvEpilogue {
  // acc_o and lse: the warp's O over its keys, normalised by its own row sums, and its lse
  // (SoftmaxLedger::finish), for its Layout::kWarpRows rows. Rows r0.. (rows_q of them) of
  // the packed tile.
  template <class Layout, class Offsets, int kRT, int kDT>
  static __device__ __forceinline__ void store(const FlashAttentionParams& p, const Offsets& off,
                                               const PackedRows& packed, u32 smem, int r0, int rows_q, int split,
                                               const float (&acc_o)[kRT][kDT][4], const float (&lse)[kRT][2],
                                               int warp, int lane, int tid) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = 16 * mt + g + 8 * hh;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
          st_shared_v2_f32(Layout::merge_o(smem, warp, row, 8 * dt + 2 * t), acc_o[mt][dt][2 * hh],
                           acc_o[mt][dt][2 * hh + 1]);
        if (t == 0) st_shared_f32(Layout::merge_lse(smem, warp, row), lse[mt][hh]);
      }
    __syncthreads();

    constexpr int kChunks = Cfg::kHeadDimPadded / 8;
    constexpr int kSlices = Layout::kKeySlices;
    const i64 rows_all = Offsets::lse_rows(p);  // the partials are in lse's row order
    for (int i = tid; i < rows_q * kChunks; i += Cfg::kThreads) {
      const int row = i / kChunks, c = i % kChunks;
      // The row's group: warps w0 .. w0 + kSlices - 1 hold it as their row `wrow`.
      const int w0 = row / Layout::kWarpRows * kSlices, wrow = row % Layout::kWarpRows;
      float part_lse[kSlices];
      LseMerge merge;
#pragma unroll
      for (int w = 0; w < kSlices; ++w) {
        part_lse[w] = ld_shared_f32(Layout::merge_lse(smem, w0 + w, wrow));
        merge.add(part_lse[w]);
      }
      const float merged = merge.lse();
      float o[8] = {};
#pragma unroll
      for (int w = 0; w < kSlices; ++w) {
        const float wt = LseMerge::weight(part_lse[w], merged);
        const uint4 lo = ld_shared_v4(Layout::merge_o(smem, w0 + w, wrow, 8 * c));
        const uint4 hi = ld_shared_v4(Layout::merge_o(smem, w0 + w, wrow, 8 * c + 4));
        const u32 bits[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] += wt * __uint_as_float(bits[e]);
      }
      const int h = packed.head(r0 + row), pos = packed.position(r0 + row);
      const i64 lse_index = off.lse_row(h) + pos;
      if (p.num_splits == 1) {
        if (c * 8 < Cfg::kHeadDim)
          store_row_chunk<typename Cfg::Element, Cfg::kHeadDim, Cfg::kVecLoad>(off.o(h, pos), c, o);
        if (c == 0 && p.lse != nullptr) p.lse[lse_index] = merged;
      } else {
        const i64 part_row = split * rows_all + lse_index;
        float4* dst = reinterpret_cast<float4*>(p.o_partial + part_row * Cfg::kHeadDimPadded + 8 * c);
        dst[0] = make_float4(o[0], o[1], o[2], o[3]);
        dst[1] = make_float4(o[4], o[5], o[6], o[7]);
        if (c == 0) p.lse_partial[part_row] = merged;
      }
    }
  }
};

}  // namespace flash
