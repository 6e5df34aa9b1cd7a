// Backward preprocess. One work tile = kBlockM query rows of one (batch, head):
// D = rowsum(dO * O) in fp32 into dsum (0 for rows past seqlen_q), and, when dQ is
// accumulated with atomics, the fp32 dQ accumulator rows zeroed.
#pragma once

#include "attention/offsets.cuh"
#include "params/kernel_traits.cuh"
#include "scheduler/single_tile.cuh"

namespace flash {

template <class Cfg, class Scheduler = SingleTileScheduler<false>>
struct BwdPreprocessKernel {
  static constexpr int kSharedBytes = 0;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (WorkTile w = Scheduler::first(); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const WorkTile& w) {
    using E = typename Cfg::Element;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = w.block * Cfg::kBlockM, h = w.head;
    const typename Cfg::Offsets off(p, w.batch);
    if (off.past_accum_rows(m0)) return;  // past a packed sequence's accumulator rows
    const i64 row_base = off.accum_row(h) + m0;

    const u16* o = off.o(h, 0);
    const u16* dout = off.dout(h, 0);
    for (int r = warp; r < Cfg::kBlockM; r += Cfg::kWarps) {
      const int row = m0 + r;
      float sum = 0.0f;
      if (row < off.seqlen_q()) {
        const u16* o_row = o + row * p.o_stride.row;
        const u16* do_row = dout + row * p.dout_stride.row;
        for (int c = lane; c < Cfg::kHeadDim; c += 32) sum += E::to_float(o_row[c]) * E::to_float(do_row[c]);
      }
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
      if (lane == 0) p.dsum[row_base + r] = sum;
    }

    if constexpr (!Cfg::kDeterministic) {
      float4* acc = reinterpret_cast<float4*>(p.dq_accum + row_base * Cfg::kHeadDimPadded);
      for (int i = tid; i < Cfg::kBlockM * Cfg::kHeadDimPadded / 4; i += Cfg::kThreads)
        acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
};

}  // namespace flash
