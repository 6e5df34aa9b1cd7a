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
    const float scale = p.softmax_scale;
    // dq[r][c], dq[r][c + 1] = x, y (scaled and rounded); c + 1 past head_dim is not written.
    const auto store_pair = [&](int r, int c, float x, float y) {
      u16* dst = dq + r * p.dq_stride.row + c;
      if (Cfg::kVecLoad || c + 1 < Cfg::kHeadDim) {
        if constexpr (Cfg::kVecLoad) {
          *reinterpret_cast<u32*>(dst) = E::pack2(x * scale, y * scale);
        } else {
          dst[0] = E::from_float(x * scale);
          dst[1] = E::from_float(y * scale);
        }
      } else {
        dst[0] = E::from_float(x * scale);
      }
    };
    if (p.dq_accum_fragment_order) {
      // Groups of 8 columns, stored even columns first (flash_dq_accum_position); the kernels
      // that write this order need head_dim % 8 == 0, so a group is whole or past head_dim.
      static_assert(flash_dq_accum_position(0) == 0 && flash_dq_accum_position(2) == 1 &&
                        flash_dq_accum_position(1) == 4 && flash_dq_accum_position(7) == 7,
                    "columns 2 k and 2 k + 1 of a group at positions k and 4 + k");
      for (int i = tid; i < rows * kD / 8; i += Cfg::kThreads) {
        const int r = i / (kD / 8), c = 8 * (i % (kD / 8));
        if (c >= Cfg::kHeadDim) continue;
        const float4 even = *reinterpret_cast<const float4*>(acc + r * kD + c);
        const float4 odd = *reinterpret_cast<const float4*>(acc + r * kD + c + 4);
        store_pair(r, c, even.x, odd.x);
        store_pair(r, c + 2, even.y, odd.y);
        store_pair(r, c + 4, even.z, odd.z);
        store_pair(r, c + 6, even.w, odd.w);
      }
      return;
    }
    // Two columns per thread: head_dim is even or the pair is cut at head_dim.
    for (int i = tid; i < rows * kD / 2; i += Cfg::kThreads) {
      const int r = i / (kD / 2), c = 2 * (i % (kD / 2));
      if (c >= Cfg::kHeadDim) continue;
      const float2 v = *reinterpret_cast<const float2*>(acc + r * kD + c);
      store_pair(r, c, v.x, v.y);
    }
  }
};

}  // namespace flash
