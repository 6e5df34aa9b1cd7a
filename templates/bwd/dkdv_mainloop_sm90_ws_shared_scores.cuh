// The warp-specialised dK/dV mainloop (sm_90a) at d256, "shared scores": one K/V tile of 64
// keys, 64-query work items. dK and dV of 64 keys x 256 columns fill two warpgroups' registers
// only split by head dim, so both consumer warpgroups own the same 64 keys and one half of
// the head dim each (DkdvMainloopSm90SharedScores' split, on the TMA producer of the
// d <= 128 kernel). Per item: warpgroup 0 computes S^T = K.Q^T, warpgroup 1 dP^T = V.dO^T
// (the same instructions with other operands) and hands it over in fragment order through
// shared memory; warpgroup 0 turns both into P^T and dS^T, stored once for both warpgroups'
// dV += P^T.dO and dK += dS^T.Q halves; each warpgroup then computes its half of dQ = dS.K
// and stages it in fp32 over the stage's Q and dO column blocks that it alone read (no
// shared memory is left for a staging tile beside two stages of Q and dO), from where the dQ
// writer warp adds it to the accumulator by TMA reductions and then frees the stage. (Vector
// atomics from the registers instead, FA3's d256 choice, ran at 0.65 of this: the L2's
// atomic rate bounds them; docs/perf-notes.md, "d256 backward, warp-specialised".)
#pragma once

#include "arch/fence.cuh"
#include "arch/mbarrier.cuh"
#include "arch/named_barrier.cuh"
#include "arch/tma.cuh"
#include "arch/wgmma_sm90.cuh"
#include "attention/offsets.cuh"
#include "bwd/dkdv_layout.cuh"
#include "bwd/dkdv_producer_sm90.cuh"
#include "bwd/dkdv_scores.cuh"
#include "bwd/dq_accum.cuh"
#include "bwd/dq_staging.cuh"
#include "pipeline/tma_pipeline.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct DkdvMainloopSm90WsSharedScores {
  static constexpr int kConsumers = 2;
  static constexpr int kD = Cfg::kHeadDimPadded;
  static constexpr bool kDq = !Cfg::kDeterministic;  // deterministic: the bwd_dq kernel computes dQ
  static_assert(Cfg::kBlockM == 64 && Cfg::kBlockN == 64 && kD == 256 && !Cfg::kSoftcap,
                "64 keys x 64 queries at d256, no softcap (its slope does not fit beside dK and dV)");

  using Split = DkdvWarpSplit<Cfg, 8>;  // consumer warp w: keys 16 (w % 4).., head-dim half w / 4
  static_assert(Split::kRT == 1 && Split::kWarpsD == 2, "one head-dim half per warpgroup");
  static constexpr int kConsumerThreads = 128 * kConsumers;
  // Every consumer thread frees a stage (warpgroup 0 also loads lse and D from it), and so
  // does the dQ writer once its reductions have read the dQ staged there.
  using Pipeline = TmaPipeline<Cfg::kStages, kConsumerThreads + (kDq ? 1 : 0), 32>;

  // Named barriers between the consumer warpgroups: dP^T handed over, P^T and dS^T stored,
  // P^T and dS^T free again (warpgroup 1's products of the last item retired), the end of
  // the mainloop; and per warpgroup, with the dQ writer warp: its dQ half staged, and taken
  // (a named barrier counts arrivals, not items: without the second one a warpgroup could
  // arrive for item t + 1 before the writer has waited for item t).
  struct Barriers {
    static constexpr int kDpFull = kNamedBarrierFirstFree;
    static constexpr int kPdsFull = kDpFull + 1;
    static constexpr int kPdsEmpty = kPdsFull + 1;
    static constexpr int kEpilogue = kPdsEmpty + 1;
    static constexpr int kDqFull0 = kEpilogue + 1;   // + wg
    static constexpr int kDqTaken0 = kDqFull0 + 2;  // + wg
  };
  static constexpr int kDqThreads = 128 + 32;

  // The all-threads shared-scores layout (K, V, the stages of Q, dO, lse, D; dS^T, P^T and
  // the fp32 dP^T fragments), then the producer's mbarriers.
  using Layout = DkdvTmaLayout<DkdvLayout<Cfg, true>, Pipeline>;
  using Producer = DkdvTmaProducer<Cfg, Layout, Pipeline>;  // the kernel's init and load

  // The shared address of dQ box j (bwd/dq_staging.cuh: columns from 128 wg + 32 j) of the item
  // in stage `stage`: over the Q and dO column blocks that only warpgroup wg read.
  static __device__ __forceinline__ u32 dq_box(const Layout& l, int stage, int wg, int j) {
    using Q = typename Layout::Q;
    static_assert(Q::kBlockBytes == dq_box_bytes(flash_dq_box_rows(Cfg::kBlockM)),
                  "a 64-column bf16 block of 64 queries holds one box");
    return (j < 2 ? l.s_q(stage) : l.s_do(stage)) + (2 * wg + j % 2) * Q::kBlockBytes;
  }

  // ---- dQ writer warp ----
  static __device__ __forceinline__ void write_dq(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                  const Layout& l, const DkdvWorkItems<Cfg>& items) {
    if constexpr (kDq) {
      const int total = items.total;
      const bool leader = (threadIdx.x & 31) == 0;
      if (leader && total > 0) tma_prefetch_descriptor(&p.tma_dq_accum);
      PipelineState st = Pipeline::consumer_start();
      for (int t = 0; t < total; ++t) {
        const AccumCoords at = off.accum_tma_coords(items.head(t), items.m0(t));
#pragma unroll
        for (int wg = 0; wg < 2; ++wg) {
          named_barrier_sync(Barriers::kDqFull0 + wg, kDqThreads);
          if (t + 1 < total) named_barrier_arrive(Barriers::kDqTaken0 + wg, kDqThreads);
          if (leader)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              tma_reduce_add_4d(&p.tma_dq_accum, dq_box(l, st.index, wg, j), 128 * wg + 32 * j, at.row, at.plane, 0);
        }
        if (leader) {
          tma_store_commit();
          tma_store_wait_read<0>();
          l.ring.consumer_release(st, true);
        }
        __syncwarp();
        st.advance(Cfg::kStages);
      }
      if (leader) tma_store_wait<0>();  // the additions are done before the CTA leaves
    }
  }

  // ---- consumer warpgroup wg (every key of the tile, head-dim columns from 128 wg) ----
  template <class Vis>
  static __device__ __forceinline__ void mma(const FlashAttentionParams& p, const Vis& vis, const Layout& l, int n0,
                                             const DkdvWorkItems<Cfg>& items, int wg, const Split& split,
                                             typename Split::Accumulator& acc_dk,
                                             typename Split::Accumulator& acc_dv) {
    using L = Layout;
    constexpr bool kBf16 = Cfg::kIsBf16;
    constexpr int kMT = Split::kMT;
    const int lane = threadIdx.x & 31;
    const int total = items.total;
    if (total == 0) return;
    const bool elementwise = wg == 0;
    const u32 dpt_slot = hand_over_slot(l.s_dpt, threadIdx.x);  // warpgroup 1's dP^T to warpgroup 0
    mbarrier_wait(l.kv_full, 0);
    PipelineState st = Pipeline::consumer_start();
    for (int t = 0; t < total; ++t) {
      const int m0 = items.m0(t);
      l.ring.consumer_wait(st);
      const u32 s_q = l.s_q(st.index), s_do = l.s_do(st.index);

      float s[1][kMT][4];  // S^T (warpgroup 0) or dP^T (warpgroup 1)
      wgmma_fence();
      wgmma_scores_t<Cfg, L>(s[0], elementwise ? l.s_k : l.s_v, 0, elementwise ? s_q : s_do);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(s);
      if (!elementwise) {
        hand_over_fragments(dpt_slot, s[0]);
        named_barrier_arrive(Barriers::kDpFull, kConsumerThreads);
      } else {
        float dtanh[1][kMT][4];  // unused (and optimised away) without softcap
        probs_t<Cfg>(s, dtanh, p, vis, 0.0f, l.s_lse(st.index), n0, n0 + split.warp_row0, m0, lane);
        u32 a[kMT / 2][4];
#pragma unroll
        for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a[kk], s[0], kk);
        if (t > 0) named_barrier_sync(Barriers::kPdsEmpty, kConsumerThreads);
        store_t_x4<typename L::DS, kMT>(l.s_pt, a, split.warp_row0, lane);
        named_barrier_sync(Barriers::kDpFull, kConsumerThreads);
        float dp[1][kMT][4];
        take_over_fragments(dpt_slot, dp[0]);
        dscores_t<Cfg>(dp, s, dtanh, l.s_dsum(st.index), lane);
#pragma unroll
        for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a[kk], dp[0], kk);
        store_t_x4<typename L::DS, kMT>(l.s_ds, a, split.warp_row0, lane);
        fence_async_shared();  // P^T and dS^T (st.shared) are read by wgmma (async proxy)
      }
      // Warpgroup 1 also passes here only once warpgroup 0 has read its dP^T.
      named_barrier_sync(Barriers::kPdsFull, kConsumerThreads);

      wgmma_fence();
      wgmma_smem_t<Cfg, L>(acc_dv[0], l.s_pt, s_do, split.d0);
      wgmma_smem_t<Cfg, L>(acc_dk[0], l.s_ds, s_q, split.d0);
      wgmma_commit();
      float dq[1][kD / 16][4];  // this warpgroup's half of dQ (unused when deterministic)
      if constexpr (kDq) wgmma_dq<Cfg, L, kD / 2>(dq[0], l.s_ds, l.s_k, 0, split.d0);
      wgmma_wait<0>();
      wgmma_fence_operand(acc_dk);
      wgmma_fence_operand(acc_dv);
      if (!elementwise && t + 1 < total) named_barrier_arrive(Barriers::kPdsEmpty, kConsumerThreads);
      if constexpr (kDq) {  // over this warpgroup's Q and dO blocks: its products of them retired
        wgmma_fence_operand(dq);
        if (t > 0) named_barrier_sync(Barriers::kDqTaken0 + wg, kDqThreads);
        stage_dq_fragments<kD / 2>([&](int j) { return dq_box(l, st.index, wg, j); }, dq[0], split.warp_row0, lane);
        fence_async_shared();  // the bulk reduction reads the boxes through the async proxy
        named_barrier_arrive(Barriers::kDqFull0 + wg, kDqThreads);
      }
      l.ring.consumer_release(st, true);
      st.advance(Cfg::kStages);
    }
    // dK and dV are staged over K and V: both warpgroups are done with them.
    named_barrier_sync(Barriers::kEpilogue, kConsumerThreads);
  }
};

}  // namespace flash
