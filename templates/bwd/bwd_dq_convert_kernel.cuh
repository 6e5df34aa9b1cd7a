// Backward epilogue of the atomic dQ path: dq = dq_accum * softmax_scale, rounded to the
// input dtype. One work tile = kBlockM query rows of one (batch, head).
#pragma once

#include "attention/offsets.cuh"
#include "params/kernel_traits.cuh"
#include "scheduler/single_tile.cuh"

namespace flash {

template <class Cfg, class Scheduler = SingleTileScheduler<false>>
struct BwdDqConvertKernel {
  static constexpr int kSharedBytes = 0;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (WorkTile w = Scheduler::first(); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const WorkTile& w) {
    using E = typename Cfg::Element;
    constexpr int kD = Cfg::kHeadDimPadded;
    const int tid = threadIdx.x;
    const int m0 = w.block * Cfg::kBlockM, h = w.head;
    const typename Cfg::Offsets off(p, w.batch);
    if (off.past_queries(m0)) return;  // a packed sequence shorter than the grid
    const float* acc = p.dq_accum + (off.accum_row(h) + m0) * kD;
    u16* dq = off.dq(h, m0);
    const int rows = min(Cfg::kBlockM, off.seqlen_q() - m0);
    // Two columns per thread: head_dim is even or the pair is cut at head_dim.
    for (int i = tid; i < rows * kD / 2; i += Cfg::kThreads) {
      const int r = i / (kD / 2), c = 2 * (i % (kD / 2));
      if (c >= Cfg::kHeadDim) continue;
      const float2 v = *reinterpret_cast<const float2*>(acc + r * kD + c);
      u16* dst = dq + r * p.dq_stride.row + c;
      if (Cfg::kVecLoad || c + 1 < Cfg::kHeadDim) {
        if constexpr (Cfg::kVecLoad) {
          *reinterpret_cast<u32*>(dst) = E::pack2(v.x * p.softmax_scale, v.y * p.softmax_scale);
        } else {
          dst[0] = E::from_float(v.x * p.softmax_scale);
          dst[1] = E::from_float(v.y * p.softmax_scale);
        }
      } else {
        dst[0] = E::from_float(v.x * p.softmax_scale);
      }
    }
  }
};

}  // namespace flash
