// The split-KV decode forward, assembled: the split-KV scheduler (which packed query tile,
// key split, KV head and batch), the decode mainloop (a deep cp.async ring of K/V tiles,
// each warp folding its slice of every tile into its own O and ledger) and the epilogue
// that merges the warps and writes O and lse, or the split's part for fwd_combine.
#pragma once

#include "arch/grid_dependency.cuh"
#include "kv_cache/kv_cache_offsets.cuh"
#include "attention/packed_rows.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "fwd/splitkv_epilogue.cuh"
#include "fwd/splitkv_mainloop.cuh"
#include "params/attention_params.h"
#include "scheduler/split_kv.cuh"

namespace flash {

template <class Cfg, class Scheduler = SplitKvScheduler, class Mainloop = FwdSplitKvMainloop<Cfg>,
          class Epilogue = FwdSplitKvEpilogue<Cfg>>
struct FwdSplitKvKernel {
  using Layout = typename Mainloop::Layout;
  static constexpr int kSharedBytes = Layout::kBytes;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    for (SplitKvTile w = Scheduler::first(p); w.valid; w = Scheduler::next(w)) tile(p, w);
  }

 private:
  static __device__ __forceinline__ void tile(const FlashAttentionParams& p, const SplitKvTile& w) {
    using Pipeline = typename Mainloop::Pipeline;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int group = p.heads_per_kv;
    const typename Mainloop::Offsets off(p, w.batch);
    const PackedRows packed{group, w.head_kv * group};
    const int r0 = w.m_block * Cfg::kBlockM;
    const int rows_q = min(Cfg::kBlockM, off.seqlen_q() * group - r0);
    if (Cfg::kVarlen && rows_q <= 0) return;  // packed: the grid covers the longest sequence
    const u32 smem = smem_u32(dynamic_smem());
    Mainloop mainloop(off, smem, packed, w.head_kv, r0, warp, lane);  // not const: load_kv looks pages up ahead
    mainloop.load_q(p, off, packed, r0, rows_q, tid);

    // The keys the tile's query positions see, in whole tiles, and this split's share of them.
    const Visibility<Cfg::kLocal> vis(off.seqlen_q(), off.seqlen_k(), p.window_left, p.window_right);
    const int q_lo = packed.position(r0), q_hi = packed.position(r0 + rows_q - 1) + 1;
    int key_lo, key_hi, n_first, n_last;
    vis.key_range(q_lo, q_hi, key_lo, key_hi);
    tile_span<Cfg::kBlockN>(key_lo, key_hi, n_first, n_last);
    const int per_split = (n_last - n_first + p.num_splits - 1) / p.num_splits;
    const int n_begin = min(n_first + w.split * per_split, n_last);
    const int n_end = min(n_begin + per_split, n_last);

    typename Mainloop::Accumulator acc_o;
    zero(acc_o);
    SoftmaxLedger<Mainloop::kRT> ledger;
    ledger.init();

    auto load = [&](int n_block, int stage) { mainloop.load_kv(p, off, n_block, stage, tid); };
    Pipeline::prologue(n_begin, n_end, load);
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    for (int n_block = n_begin; n_block < n_end; ++n_block) {
      Pipeline::acquire(n_block, n_begin, n_end, load);
      mainloop.consume(p, vis, Pipeline::stage(n_block, n_begin), n_block, q_lo, q_hi, warp, lane, softcap_pre, acc_o,
                       ledger);
      Pipeline::release();
    }
    Pipeline::drain();  // the epilogue's merge buffers overlay the ring
    launch_dependents();  // fwd_combine may be scheduled (it waits for this grid to finish)

    float lse[Mainloop::kRT][2];
    ledger.finish(acc_o, p.scale_log2, lse);
    Epilogue::template store<Layout>(p, off, packed, smem, r0, rows_q, w.split, acc_o, lse, warp, lane, tid);
  }
};

}  // namespace flash
