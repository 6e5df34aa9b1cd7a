// The warp-specialised forward kernel (sm_90a), assembled: a tile scheduler, the TMA
// producer / wgmma consumer mainloop (fwd/fwd_mainloop_sm90.cuh) and the TMA-store
// epilogue. Warpgroup 0 is the producer: it gives its registers up (setmaxnreg) and one
// thread issues every load; warpgroups 1..kConsumers compute 64 query rows each with the
// registers the producer gave up. Every role walks the scheduler's tiles: one per CTA
// (SingleTileScheduler), or persistent (StaticPersistentScheduler: the mainloop's rings and
// Q tile carry over, O is staged apart or over the V ring, Cfg::kPersistent).
#pragma once

#include "arch/ptx.cuh"
#include "arch/warpgroup.cuh"
#include "attention/offsets.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "fwd/fwd_epilogue_sm90.cuh"
#include "fwd/fwd_mainloop_sm90.cuh"
#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"

namespace flash {

template <class Cfg, class Scheduler = SingleTileScheduler<true>, class Mainloop = FwdMainloopSm90<Cfg>,
          class Epilogue = FwdEpilogueSm90<Cfg>>
struct FwdKernelSm90 {
  using Layout = typename Mainloop::Layout;
  static constexpr int kSharedBytes = Layout::kBytes;
  static constexpr int kConsumers = Mainloop::kConsumers;
  static_assert(Cfg::kThreads == 128 * (kConsumers + 1), "one producer warpgroup plus the consumers");
  // Registers per thread after the hand-over (65,536 per SM, one CTA): FA3's split.
  static_assert(kConsumers == 2 || kConsumers == 3, "two or three consumer warpgroups");
  static constexpr int kProducerRegisters = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumerRegisters = kConsumers == 2 ? 240 : 160;
  static_assert(register_split_fits<kConsumers + 1, kProducerRegisters, kConsumerRegisters>(), "register split");

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    const Mainloop mainloop(smem_u32(dynamic_smem()));
    if (threadIdx.x == 0) mainloop.init();
    __syncthreads();  // the only CTA-wide barrier: the producer's idle warps leave after it

    const int wg = warpgroup_index();
    if (wg == 0) {
      setmaxnreg_dec<kProducerRegisters>();
      if (threadIdx.x != 0) return;
      typename Mainloop::RoleState st = mainloop.producer_start(p);
      for (WorkTile w = Scheduler::first(p); w.valid; w = Scheduler::next(p, w)) {
        const Tile t(p, w);
        if (!t.skipped) mainloop.load(p, t.off, w.head, t.h_kv, t.m0, t.n_begin, t.n_end, st);
      }
      return;
    }
    setmaxnreg_inc<kConsumerRegisters>();
    typename Mainloop::RoleState st = Mainloop::consumer_start();
    for (WorkTile w = Scheduler::first(p); w.valid; w = Scheduler::next(p, w)) {
      const Tile t(p, w);
      if (t.skipped) continue;
      typename Mainloop::Accumulator o;
      zero(o);
      typename Mainloop::Ledger ledger;
      ledger.init();
      mainloop.mma(p, t.vis, t.m0, t.rows_q, t.n_begin, t.n_end, wg - 1, o, ledger, st);
      float lse[1][2];
      ledger.finish(o, p.scale_log2, lse);
      Epilogue::template store<typename Layout::Q>(p, t.off, mainloop.s_o, w.head, t.m0, t.rows_q, o, lse, wg - 1,
                                                   Mainloop::Barriers::kEpilogue + wg - 1);
      mainloop.release_o((threadIdx.x & 127) == 0);
    }
  }

 private:
  // A work tile as every role sees it: its sequence's offsets, its query rows and the key
  // tiles they see. Skipped: a packed sequence shorter than the grid's longest.
  struct Tile {
    typename Cfg::Offsets off;
    int h_kv, m0, rows_q, n_begin = 0, n_end = 0;
    Visibility<Cfg::kLocal> vis;
    bool skipped;

    __device__ __forceinline__ Tile(const FlashAttentionParams& p, const WorkTile& w)
        : off(p, w.batch), h_kv(w.head / p.heads_per_kv), m0(w.block * Cfg::kBlockM),
          rows_q(min(Cfg::kBlockM, off.seqlen_q() - m0)),
          vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right), skipped(off.past_queries(m0)) {
      if (skipped) return;
      int key_lo, key_hi;
      vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
      tile_span<Cfg::kBlockN>(key_lo, key_hi, n_begin, n_end);
    }
  };
};

}  // namespace flash
