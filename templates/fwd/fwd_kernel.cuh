// The forward kernel, assembled: a tile scheduler (which Q tile of which batch and head),
// the mainloop (producer: Q and the visible K/V tiles through the cp.async pipeline;
// consumer: scores, mask, softmax ledger, P.V) and the epilogue (O and lse).
#pragma once

#include "attention/offsets.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "fwd/fwd_epilogue.cuh"
#include "fwd/fwd_mainloop.cuh"
#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"

namespace flash {

template <class Cfg, class Scheduler = SingleTileScheduler<true>, class Mainloop = FwdMainloop<Cfg>,
          class Epilogue = FwdEpilogue<Cfg>>
struct FwdKernel {
  using Layout = typename Mainloop::Layout;
  static constexpr int kSharedBytes = Layout::kBytes;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (WorkTile w = Scheduler::first(); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const WorkTile& w) {
    using Pipeline = typename Mainloop::Pipeline;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = w.head;
    const int h_kv = h / p.heads_per_kv;
    const int m0 = w.block * Cfg::kBlockM;
    const typename Cfg::Offsets off(p, w.batch);
    if (off.past_queries(m0)) return;  // a packed sequence shorter than the grid
    const int rows_q = min(Cfg::kBlockM, off.seqlen_q() - m0);
    const int warp_row0 = warp * 16 * Mainloop::kRT;  // within the tile
    const Mainloop mainloop(off, smem_u32(dynamic_smem()), h_kv, rows_q);

    // Q first, before the key range: later, the d256 causal forward runs 3-6 % slower (the
    // same loop, scheduled otherwise by ptxas; docs/perf-notes.md).
    mainloop.load_q(p, off, h, m0, tid);
    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    int key_lo, key_hi, n_begin, n_end;
    vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
    tile_span<Cfg::kBlockN>(key_lo, key_hi, n_begin, n_end);

    typename Mainloop::Accumulator acc_o;
    zero(acc_o);
    SoftmaxLedger<Mainloop::kRT> ledger;
    ledger.init();

    auto load = [&](int n_block, int stage) { mainloop.load_kv(p, off, n_block, stage, tid); };
    Pipeline::prologue(n_begin, n_end, load);
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    for (int n_block = n_begin; n_block < n_end; ++n_block) {
      Pipeline::acquire(n_block, n_begin, n_end, load);
      mainloop.consume(p, vis, Pipeline::stage(n_block, n_begin), n_block, m0, warp_row0, lane, softcap_pre, acc_o,
                       ledger);
      Pipeline::release();
    }
    // The Q copy is still in flight when the tile sees no key; with wgmma, every warpgroup
    // must be done reading Q before O overwrites it.
    Pipeline::drain();

    float lse[Mainloop::kRT][2];
    ledger.finish(acc_o, p.scale_log2, lse);
    Epilogue::template store<typename Layout::Q>(p, off, mainloop.s_q, h, m0, rows_q, acc_o, lse, warp_row0, tid, lane);
  }
};

}  // namespace flash
