// The dQ kernel of the deterministic backward, assembled: the single-tile scheduler (one Q
// tile of one (batch, head) per CTA, heaviest first), the dQ mainloop over the K/V tiles the
// Q tile sees, and the epilogue dq = dQ * softmax_scale (registers -> shared -> global),
// written once.
#pragma once

#include "attention/offsets.cuh"
#include "attention/visibility.cuh"
#include "bwd/bwd_dq_mainloop.cuh"
#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg, class Scheduler = SingleTileScheduler<true>, class Mainloop = BwdDqMainloop<Cfg>>
struct BwdDqKernel {
  using Layout = typename Mainloop::Layout;
  static constexpr int kSharedBytes = Layout::kBytes;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (WorkTile w = Scheduler::first(); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const WorkTile& w) {
    using Pipeline = typename Mainloop::Pipeline;
    constexpr int kRT = Mainloop::kRT;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2;
    const int h = w.head;
    const int h_kv = h / p.heads_per_kv;
    const int m0 = w.block * Cfg::kBlockM;
    const typename Cfg::Offsets off(p, w.batch);
    if (off.past_queries(m0)) return;  // a packed sequence shorter than the grid
    const int rows_q = min(Cfg::kBlockM, off.seqlen_q() - m0);
    const int warp_row0 = warp * 16 * kRT;
    const Mainloop mainloop(off, smem_u32(dynamic_smem()), h_kv, rows_q);

    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    int key_lo, key_hi, n_begin, n_end;
    vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
    tile_span<Cfg::kBlockN>(key_lo, key_hi, n_begin, n_end);

    // Per-row lse * log2e (+inf for empty rows and rows past seqlen_q: P = 0) and D.
    float lse_log2[kRT][2], dsum[kRT][2];
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mt + g + 8 * hh;
        const bool valid = row < rows_q;
        const float lse = valid ? p.lse[off.lse_row(h) + m0 + row] : neg_inf();
        lse_log2[mt][hh] = lse == neg_inf() ? pos_inf() : lse * kLog2e;
        dsum[mt][hh] = valid ? p.dsum[off.accum_row(h) + m0 + row] : 0.0f;
      }

    auto load = [&](int n_block, int stage) { mainloop.load_kv(p, off, n_block, stage, tid); };
    mainloop.load_q_do(p, off, h, m0, tid);
    Pipeline::prologue(n_begin, n_end, load);

    typename Mainloop::Accumulator acc_dq;
    zero(acc_dq);
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    for (int n_block = n_begin; n_block < n_end; ++n_block) {
      Pipeline::acquire(n_block, n_begin, n_end, load);
      mainloop.consume(p, vis, Pipeline::stage(n_block, n_begin), n_block, m0, warp_row0, lane, softcap_pre, lse_log2,
                       dsum, acc_dq);
      Pipeline::release();
    }
    Pipeline::drain();

    using Q = typename Layout::Q;
    store_fragments<typename Cfg::Element, Q, true>(mainloop.s_q, acc_dq, warp_row0, 0, p.softmax_scale, lane);
    __syncthreads();
    store_tile<Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(off.dq(h, m0), p.dq_stride.row, mainloop.s_q, rows_q,
                                                                tid);
  }
};

}  // namespace flash
