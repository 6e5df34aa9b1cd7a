// The warp-specialised dK/dV kernel (sm_90a), assembled: the single-tile scheduler (one K/V
// tile of kBlockN keys of one (batch, kv head) per CTA), a TMA producer / wgmma consumer
// mainloop (bwd/dkdv_mainloop_sm90_ws.cuh: two warpgroups of 64 keys, d64..128;
// bwd/dkdv_mainloop_sm90_ws_shared_scores.cuh: the same 64 keys, a head-dim half each, d256)
// and the dK/dV epilogue on the consumer threads. Warpgroup 0: warp 0 loads, warp 1 adds the
// staged dQ tiles to the accumulator, warps 2-3 leave; all four give their registers up
// (setmaxnreg) to the two consumer warpgroups.
#pragma once

#include "arch/ptx.cuh"
#include "arch/warpgroup.cuh"
#include "attention/offsets.cuh"
#include "attention/visibility.cuh"
#include "bwd/dkdv_epilogue.cuh"
#include "bwd/dkdv_layout.cuh"
#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg, class Mainloop, class Scheduler = SingleTileScheduler<false, false>,
          class Epilogue = DkdvEpilogue<Cfg, StoreGroup<Mainloop::kConsumerThreads, Mainloop::Barriers::kEpilogue>>>
struct BwdDkdvKernelSm90 {
  using Layout = typename Mainloop::Layout;
  using Split = typename Mainloop::Split;
  static constexpr int kSharedBytes = Layout::kBytes;
  static_assert(Cfg::kThreads == 128 + Mainloop::kConsumerThreads, "one producer warpgroup plus the consumers");
  static constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;
  static_assert(register_split_fits<Mainloop::kConsumers + 1, kProducerRegisters, kConsumerRegisters>(),
                "register split");

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    const Layout l(smem_u32(dynamic_smem()));
    if (threadIdx.x == 0) Mainloop::Producer::init(l);
    __syncthreads();  // the only CTA-wide barrier: the producer's idle warps leave after it

    const WorkTile w = Scheduler::first(p);
    if (!w.valid) return;  // the section grid's last section may be short: the whole CTA
    const int h_kv = w.head;
    const typename Cfg::Offsets off(p, w.batch);
    const int n0 = w.block * Cfg::kBlockN;
    if (off.past_keys(n0)) return;  // a packed sequence shorter than the grid: the whole CTA
    const int rows_k = keys_in_tile(off, n0);
    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    const DkdvWorkItems<Cfg> items(vis, h_kv, p.heads_per_kv, n0, rows_k);

    const int wg = warpgroup_index();
    if (wg == 0) {
      setmaxnreg_dec<kProducerRegisters>();
      const int warp = threadIdx.x >> 5;
      if (warp == 0) Mainloop::Producer::load(p, off, l, h_kv, n0, items);
      if (warp == 1) Mainloop::write_dq(p, off, l, items);
      return;
    }
    setmaxnreg_inc<kConsumerRegisters>();
    const int consumer_tid = threadIdx.x - 128;
    const Split split(consumer_tid >> 5);
    typename Split::Accumulator acc_dk, acc_dv;
    zero(acc_dk);
    zero(acc_dv);
    Mainloop::mma(p, vis, l, n0, items, wg - 1, split, acc_dk, acc_dv);
    // The sequence's offsets again (packed sequences: two loads) rather than held in registers
    // through the mainloop, where the 128-query tiles need every one.
    const typename Cfg::Offsets out(p, w.batch);
    Epilogue::store(p, out, l, split, h_kv, n0, keys_in_tile(out, n0), acc_dk, acc_dv, consumer_tid, consumer_tid & 31);
  }

 private:
  // The keys of the tile from n0 that its sequence has.
  static __device__ __forceinline__ int keys_in_tile(const typename Cfg::Offsets& off, int n0) {
    return min(Cfg::kBlockN, off.seqlen_k() - n0);
  }
};

}  // namespace flash
