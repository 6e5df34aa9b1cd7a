// The dK/dV kernel (FlashAttention-2's backward), assembled: the single-tile scheduler (one
// K/V tile of kBlockN keys of one (batch, kv head) per CTA), a dK/dV mainloop over the query
// heads of the GQA group and the Q tiles that see the keys (the producer streams Q, dO, lse
// and D through the cp.async pipeline; the consumer recomputes the transposed scores and
// accumulates dK, dV and, unless deterministic, dQ with atomics), and the dK/dV epilogue.
// Mainloops: DkdvMainloopSm80 (mma.sync), DkdvMainloopSm90 (wgmma), DkdvMainloopSm90SharedScores
// (wgmma at d256); the host picks one (KernelSpec::dkdv_mainloop).
#pragma once

#include "attention/offsets.cuh"
#include "attention/visibility.cuh"
#include "bwd/dkdv_epilogue.cuh"
#include "bwd/dkdv_layout.cuh"
#include "params/attention_params.h"
#include "scheduler/single_tile.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg, class Mainloop, class Scheduler = SingleTileScheduler<false>, class Epilogue = DkdvEpilogue<Cfg>>
struct BwdDkdvKernel {
  using Layout = typename Mainloop::Layout;
  static constexpr int kSharedBytes = Layout::kBytes;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (WorkTile w = Scheduler::first(); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const WorkTile& w) {
    using Pipeline = typename Mainloop::Pipeline;
    using Split = typename Mainloop::Split;
    using Producer = DkdvProducer<Cfg, Layout>;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const Layout l(smem_u32(dynamic_smem()));
    const Split split(warp);
    const int n_block = w.block, h_kv = w.head;
    const typename Cfg::Offsets off(p, w.batch);
    const int group = p.heads_per_kv;
    const int n0 = n_block * Cfg::kBlockN;
    if (off.past_keys(n0)) return;  // a packed sequence shorter than the grid
    const int rows_k = min(Cfg::kBlockN, off.seqlen_k() - n0);

    Producer::load_kv(p, off, l, h_kv, n0, rows_k, tid);
    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    const DkdvWorkItems<Cfg> items(vis, h_kv, group, n0, rows_k);
    const int total = items.total;
    auto load = [&](int t, int stage) { Producer::load_stage(p, off, l, items.head(t), items.m0(t), stage, tid); };
    Pipeline::prologue(0, total, load);

    typename Split::Accumulator acc_dk, acc_dv;
    zero(acc_dk);
    zero(acc_dv);
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    for (int t = 0; t < total; ++t) {
      const int h = items.head(t), m0 = items.m0(t);
      Pipeline::acquire(t, 0, total, load);
      Mainloop::consume(p, off, vis, l, split, Pipeline::stage(t, 0), h, m0, n0, tid, warp, lane,
                        softcap_pre, acc_dk, acc_dv);
      Pipeline::release();
    }
    Pipeline::drain();  // the K/V copy is still in flight when no query sees these keys

    Epilogue::store(p, off, l, split, h_kv, n0, rows_k, acc_dk, acc_dv, tid, lane);
  }
};

}  // namespace flash
