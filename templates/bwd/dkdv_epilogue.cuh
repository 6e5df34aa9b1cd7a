// The dK/dV epilogue: dK * softmax_scale and dV, summed over the GQA group in registers,
// through the K and V tiles in shared memory (free after the mainloop) to global, written once.
#pragma once

#include "arch/named_barrier.cuh"
#include "attention/offsets.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

// The threads that store: every thread of the CTA (kBarrier < 0: __syncthreads), or the
// consumer warpgroups of a warp-specialised kernel (named barrier kBarrier).
template <int kThreads_, int kBarrier = -1>
struct StoreGroup {
  static constexpr int kThreads = kThreads_;
  static __device__ __forceinline__ void sync() {
    if constexpr (kBarrier < 0) {
      __syncthreads();
    } else {
      // Twice: compute-sanitizer's racecheck reports the d256 kernel's fragment stores
      // against other warps' tile loads across one 256-thread named barrier (fresh id,
      // .aligned form or __syncwarp before it alike) and is clean with two; the second costs
      // one barrier per CTA. docs/perf-notes.md, "racecheck on the d256 kernel".
      named_barrier_sync(kBarrier, kThreads);
      named_barrier_sync(kBarrier, kThreads);
    }
  }
};

// `tid` is the thread's index in Group.
template <class Cfg, class Group = StoreGroup<Cfg::kThreads>>
struct DkdvEpilogue {
  template <class Layout, class Split>
  static __device__ __forceinline__ void store(const FlashAttentionParams& p, const typename Cfg::Offsets& off, const Layout& l,
                                               const Split& split, int h_kv, int n0, int rows_k,
                                               const typename Split::Accumulator& acc_dk,
                                               const typename Split::Accumulator& acc_dv, int tid, int lane) {
    using E = typename Cfg::Element;
    using KV = typename Layout::KV;
    // dK and dV fragments stored side by side (two store_fragments loops cost the d128
    // deterministic kernel 52 bytes of spills).
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int mt = 0; mt < Split::kRT; ++mt)
#pragma unroll
      for (int dt = 0; dt < Split::kDT; ++dt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = split.warp_row0 + 16 * mt + g + 8 * hh;
          const int col = split.d0 + 8 * dt + 2 * tq;
          const float* dk = acc_dk[mt][dt];
          const float* dv = acc_dv[mt][dt];
          st_shared_u32(l.s_k + KV::elem(row, col), E::pack2(dk[2 * hh] * p.softmax_scale, dk[2 * hh + 1] * p.softmax_scale));
          st_shared_u32(l.s_v + KV::elem(row, col), E::pack2(dv[2 * hh], dv[2 * hh + 1]));
        }
    Group::sync();
    store_tile<KV, Group::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(off.dk(h_kv, n0), p.dk_stride.row, l.s_k, rows_k, tid);
    store_tile<KV, Group::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(off.dv(h_kv, n0), p.dv_stride.row, l.s_v, rows_k, tid);
  }
};

}  // namespace flash
