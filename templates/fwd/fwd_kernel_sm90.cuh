// The warp-specialised forward kernel (sm_90a), assembled: a tile scheduler, the TMA
// producer / wgmma consumer mainloop (fwd/fwd_mainloop_sm90.cuh) and the TMA-store
// epilogue. Warpgroup 0 is the producer: it gives its registers up (setmaxnreg) and one
// thread issues every load; warpgroups 1..kConsumers compute 64 query rows each with the
// registers the producer gave up. One tile per CTA: a persistent scheduler needs the Q tile
// (which O is staged in) guarded across tiles, which this kernel does not do yet.
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

    const WorkTile w = Scheduler::first();
    const int h = w.head;
    const int h_kv = h / (p.heads_q / p.heads_kv);
    const int m0 = w.block * Cfg::kBlockM;
    const typename Cfg::Offsets off(p, w.batch);
    if (off.past_queries(m0)) return;  // a packed sequence shorter than the grid: the whole CTA
    const int rows_q = min(Cfg::kBlockM, off.seqlen_q() - m0);
    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    int key_lo, key_hi, n_begin, n_end;
    vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
    tile_span<Cfg::kBlockN>(key_lo, key_hi, n_begin, n_end);

    const int wg = warpgroup_index();
    if (wg == 0) {
      setmaxnreg_dec<kProducerRegisters>();
      if (threadIdx.x == 0) mainloop.load(p, off, h, h_kv, m0, n_begin, n_end);
      return;
    }
    setmaxnreg_inc<kConsumerRegisters>();
    typename Mainloop::Accumulator o;
    zero(o);
    typename Mainloop::Ledger ledger;
    ledger.init();
    mainloop.mma(p, vis, m0, rows_q, n_begin, n_end, wg - 1, o, ledger);
    float lse[1][2];
    ledger.finish(o, p.scale_log2, lse);
    Epilogue::template store<typename Layout::Q>(p, off, mainloop.s_q, h, m0, rows_q, o, lse, wg - 1,
                                                 Mainloop::Barriers::kEpilogue + wg - 1);
  }
};

}  // namespace flash
