// The warp-specialised dK/dV mainloop (sm_90a) for one K/V tile of kBlockN keys, d <= 128.
// Producer warp: K and V once by TMA, then per work item (query head of the GQA group, Q
// tile) a ring stage of Q and dO by TMA plus lse * log2e and D written by its lanes. Two
// consumer warpgroups own 64 keys each: S^T = K.Q^T and dP^T = V.dO^T (one wgmma group),
// P^T and dS^T in registers as the A operands of dV += P^T.dO and dK += dS^T.Q, and (unless
// deterministic) dS^T through shared memory (double-buffered by item) into dQ = dS.K, staged
// in fp32 boxes (bwd/dq_staging.cuh) for the dQ writer warp, which adds each warpgroup's part
// to the fp32 accumulator by TMA reductions (p.tma_dq_accum) once that warpgroup has staged it
// and issued its next item's scores (the hand-over's proxy fence then finds the stores done):
// no atomics on the consumers, and no wait of one warpgroup for the other at the staging (a
// shared tile with one handshake for both cost ~10 %: docs/perf-notes.md, "dQ staging per
// warpgroup"). Q tiles of 64 queries (d64..d128)
// split dQ's head dim between the warpgroups; Q tiles of 128 (d64, FA3's tile: half the items,
// so half the per-item barriers, dS^T stores and reductions) split its queries; Q tiles of 80
// (d128 unmasked, FA3's and FA4's tile: 25 % more work per item, and S^T, dP^T as 64 x 80
// products read fewer shared bytes per FLOP than 64 x 64 ones) split its head dim too, as
// dQ^T = K^T.dS^T (80 queries are no wgmma M), dS stored [query][key].
// Per item the products go out as dV, dQ, dK (FA3's order): the dQ tile is staged while dK
// is still in flight.
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
#include "bwd/dq_staging.cuh"
#include "pipeline/tma_pipeline.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct DkdvMainloopSm90Ws {
  static constexpr int kConsumers = Cfg::kBlockN / 64;  // warpgroups of 64 keys
  static constexpr int kD = Cfg::kHeadDimPadded;
  static constexpr bool kDq = !Cfg::kDeterministic;  // deterministic: the bwd_dq kernel computes dQ
  // 128-query tiles: warpgroup wg computes dQ of queries 64 wg.. over the whole head dim;
  // 64-query tiles: every query, columns split in halves on 32-column boundaries (d96: 64 + 32).
  static constexpr bool kDqByRows = Cfg::kBlockM == 128;
  static constexpr bool kDqSwapped = Cfg::kBlockM == 80;  // dQ^T per warpgroup: 64 head-dim columns x 80 queries
  // 128-query tiles (d64) commit S^T and dP^T as two wgmma groups and run P^T's exponentials
  // while dP^T is still on the tensor pipe (FA3's and FA4's order): +3..9 % unmasked d64
  // backward on an H100, causal within noise (sessions 22-23). At 64- and 80-query tiles
  // (d96/d128) the same order measured -5..+4 % with no consistent sign (sessions 11, 22), so
  // they wait for both groups: docs/perf-notes.md, "Session 23: the split wait lands at d64".
  static constexpr bool kSplitWait = Cfg::kBlockM == 128;
  static constexpr int kDqCols0 = (kD / 2 + 31) / 32 * 32;
  static constexpr int kDqCols1 = kD - kDqCols0;
  static_assert(kConsumers == 2 && ((Cfg::kBlockM == 64 && kD >= 64 && kD <= 128) ||
                                    (Cfg::kBlockM == 128 && kD == 64) || (Cfg::kBlockM == 80 && kD == 128)),
                "2 warpgroups of 64 keys over 64 queries (d64..d128), 128 queries (d64) or 80 queries (d128)");

  using Split = DkdvWarpSplit<Cfg, 8>;  // over the consumer warps: warp w owns keys 16 w..
  static_assert(Split::kRT == 1 && Split::kWarpsD == 1, "one 16-key slice and every dK/dV column per warp");
  static constexpr int kConsumerThreads = 128 * kConsumers;
  // Every consumer thread frees a stage, since each also loads lse and D from it (an arrival
  // releases only its own thread's accesses: one lane's after __syncwarp would order the
  // others' loads only transitively, which racecheck does not follow); the producer warp's
  // lanes each arrive after writing theirs.
  using Pipeline = TmaPipeline<Cfg::kStages, kConsumerThreads, 32>;

  // Named barriers: dS^T complete (consumers), the end of the mainloop (consumers); per
  // warpgroup, with the dQ writer warp: its dQ boxes staged, and read out again.
  struct Barriers {
    static constexpr int kDsFull = kNamedBarrierFirstFree;
    static constexpr int kEpilogue = kDsFull + 1;
    static constexpr int kDqFull0 = kEpilogue + 1;   // + wg
    static constexpr int kDqEmpty0 = kDqFull0 + 2;  // + wg
  };
  static constexpr int kDqThreads = 128 + 32;

  // Warpgroup wg's part of dQ: queries 64 wg.. and every column (128-query tiles), or every
  // query and columns kDqCol0(wg).. (64- and 80-query tiles); the staging boxes of 32 columns
  // cover each row block's columns in order, so box (row block, column / 32).
  static constexpr int kDqBoxRows = flash_dq_box_rows(Cfg::kBlockM);
  static constexpr int kDqBoxBytes = dq_box_bytes(kDqBoxRows);
  static constexpr int kDqBoxesPerRowBlock = (kD + kFlashDqBoxCols - 1) / kFlashDqBoxCols;
  static constexpr int kDqBoxes = kDq ? Cfg::kBlockM / kDqBoxRows * kDqBoxesPerRowBlock : 0;
  static constexpr int kDqRow0(int wg) { return kDqByRows ? 64 * wg : 0; }
  static constexpr int kDqCol0(int wg) { return kDqByRows || wg == 0 ? 0 : kDqCols0; }
  static constexpr int kDqCols(int wg) { return kDqByRows ? kD : wg == 0 ? kDqCols0 : kDqCols1; }

  // The all-threads kernels' layout (K, V, the stages of Q, dO, lse, D; dS^T buffer 0), then
  // dS^T buffer 1 and the dQ staging boxes; the producer's mbarriers after them.
  struct Tiles : DkdvLayout<Cfg, false> {
    using Base = DkdvLayout<Cfg, false>;
    using DS = typename Base::DS;
    static constexpr int kDs1 = Base::kBytes;
    static constexpr int kDqTile = kDs1 + (kDq ? DS::kBytes : 0);
    static_assert(kDqTile % 1024 == 0, "a 128-byte swizzled box starts 1024-byte aligned");
    static constexpr int kBytes = kDqTile + kDqBoxes * kDqBoxBytes;
    static_assert(Base::kDsByQuery == kDqSwapped, "the swapped dQ product reads dS [query][key]");

    u32 s_ds1, s_dq;

    __device__ __forceinline__ explicit Tiles(u32 smem) : Base(smem), s_ds1(smem + kDs1), s_dq(smem + kDqTile) {}
    __device__ __forceinline__ u32 s_ds_of(int item) const { return item % 2 ? s_ds1 : this->s_ds; }
    // The box of warpgroup wg's dQ part that holds its column `col` (a multiple of 32).
    __device__ __forceinline__ u32 dq_box(int wg, int col) const {
      return s_dq + ((kDqByRows ? wg * kDqBoxesPerRowBlock : 0) + col / kFlashDqBoxCols) * kDqBoxBytes;
    }
  };
  using Layout = DkdvTmaLayout<Tiles, Pipeline>;
  using Producer = DkdvTmaProducer<Cfg, Layout, Pipeline>;  // the kernel's init and load

  // ---- dQ writer warp (all 32 lanes; one issues) ----
  // Per item and warpgroup: once it has staged its part, dQ_accum += the part's boxes; once
  // they are read out, the warpgroup may stage the next item's.
  static __device__ __forceinline__ void write_dq(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                                  const Layout& l, const DkdvWorkItems<Cfg>& items) {
    if constexpr (kDq) {
      const int total = items.total;
      const bool leader = (threadIdx.x & 31) == 0;
      if (leader && total > 0) tma_prefetch_descriptor(&p.tma_dq_accum);
      for (int t = 0; t < total; ++t) {
        const AccumCoords at = off.accum_tma_coords(items.head(t), items.m0(t));
#pragma unroll
        for (int wg = 0; wg < 2; ++wg) {
          named_barrier_sync(Barriers::kDqFull0 + wg, kDqThreads);
          if (leader) {
#pragma unroll
            for (int col = kDqCol0(wg); col < kDqCol0(wg) + kDqCols(wg); col += kFlashDqBoxCols)
              tma_reduce_add_4d(&p.tma_dq_accum, l.dq_box(wg, col), col, at.row + kDqRow0(wg), at.plane, 0);
            tma_store_commit();
            tma_store_wait_read<0>();
          }
          __syncwarp();
          if (t + 1 < total) named_barrier_arrive(Barriers::kDqEmpty0 + wg, kDqThreads);
        }
      }
      if (leader) tma_store_wait<0>();  // the additions are done before the CTA leaves
    }
  }

  // ---- consumer warpgroup wg (keys 64 wg .. of the tile; split over the consumer warps) ----
  template <class Vis>
  static __device__ __forceinline__ void mma(const FlashAttentionParams& p, const Vis& vis, const Layout& l, int n0,
                                             const DkdvWorkItems<Cfg>& items, int wg,
                                             const Split& split, typename Split::Accumulator& acc_dk,
                                             typename Split::Accumulator& acc_dv) {
    using L = Layout;
    constexpr bool kBf16 = Cfg::kIsBf16;
    constexpr int kMT = Split::kMT;
    const int lane = threadIdx.x & 31;
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    const int total = items.total;
    if (total == 0) return;
    mbarrier_wait(l.kv_full, 0);
    PipelineState st = Pipeline::consumer_start();
    for (int t = 0; t < total; ++t) {
      const int m0 = items.m0(t);
      l.ring.consumer_wait(st);
      const u32 s_q = l.s_q(st.index), s_do = l.s_do(st.index);

      float s[1][kMT][4], dp[1][kMT][4];
      wgmma_fence();
      wgmma_scores_t<Cfg, L>(s[0], l.s_k, 64 * wg, s_q);
      if constexpr (kSplitWait) wgmma_commit();
      wgmma_scores_t<Cfg, L>(dp[0], l.s_v, 64 * wg, s_do);
      wgmma_commit();
      // The previous item's dQ part, staged while its dK ran, goes to the writer only now: its
      // stores have long completed, so the proxy fence costs nothing here, where right after
      // the staging it stalled the warpgroup (~6 % of the kernel's stall samples at d128).
      if constexpr (kDq)
        if (t > 0) hand_over_dq(wg);
      float dtanh[1][kMT][4];  // unused (and optimised away) without softcap
      u32 a_p[kMT / 2][4], a_ds[kMT / 2][4];  // P^T and dS^T as A operands
      wgmma_wait<kSplitWait ? 1 : 0>();
      wgmma_fence_operand(s);
      if constexpr (!kSplitWait) wgmma_fence_operand(dp);
      probs_t<Cfg>(s, dtanh, p, vis, softcap_pre, l.s_lse(st.index), n0, n0 + split.warp_row0, m0, lane);
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_p[kk], s[0], kk);
      if constexpr (kSplitWait) {
        wgmma_wait<0>();
        wgmma_fence_operand(dp);
      }
      dscores_t<Cfg>(dp, s, dtanh, l.s_dsum(st.index), lane);
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kBf16>(a_ds[kk], dp[0], kk);
      const u32 s_ds = l.s_ds_of(t);
      if constexpr (kDq && kDqSwapped) store_x4_trans<typename L::DS, kMT>(s_ds, a_ds, split.warp_row0, lane);
      else if constexpr (kDq) store_t_x4<typename L::DS, kMT>(s_ds, a_ds, split.warp_row0, lane);

      // One wgmma over every head-dim column per k-step.
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk)
        Wgmma<kD, kBf16>::template rs<true>(acc_dv[0], a_p[kk], desc_mn_major<typename L::Q>(s_do, 16 * kk));
      wgmma_commit();
      if constexpr (kDq) {
        fence_async_shared();  // dS^T (st.shared) is read by the dQ wgmma (async proxy)
        named_barrier_sync(Barriers::kDsFull, kConsumerThreads);
        if constexpr (kDqByRows)  // queries 64 wg..: the dS^T tile's 64-column block wg
          dq_product<kD>(l, wg, t > 0, s_ds + wg * L::DS::kBlockBytes, s_q, a_ds, acc_dk);
        else if constexpr (kDqCols0 == kDqCols1)  // equal halves (d64, d128; swapped): one copy of the code
          dq_product<kDqCols0>(l, wg, t > 0, s_ds, s_q, a_ds, acc_dk);
        else if (wg == 0)
          dq_product<kDqCols0>(l, 0, t > 0, s_ds, s_q, a_ds, acc_dk);
        else
          dq_product<kDqCols1>(l, 1, t > 0, s_ds, s_q, a_ds, acc_dk);
      } else {
        dk_product(s_q, a_ds, acc_dk);
      }
      wgmma_wait<0>();
      wgmma_fence_operand(a_p);
      wgmma_fence_operand(a_ds);
      wgmma_fence_operand(acc_dk);
      wgmma_fence_operand(acc_dv);
      release(l, st);
      st.advance(Cfg::kStages);
    }
    if constexpr (kDq) hand_over_dq(wg);  // the last item's part
    // The other warpgroup's last dQ product may still read K: the epilogue stages dK over it.
    named_barrier_sync(Barriers::kEpilogue, kConsumerThreads);
  }

 private:
  // The thread is done with the stage (its products retired, its loads returned).
  static __device__ __forceinline__ void release(const Layout& l, const PipelineState& st) {
    l.ring.consumer_release(st, true);
  }

  // dK += dS^T.Q (one wgmma group, committed).
  static __device__ __forceinline__ void dk_product(u32 s_q, u32 (&a_ds)[Split::kMT / 2][4],
                                                    typename Split::Accumulator& acc_dk) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Split::kMT / 2; ++kk)
      Wgmma<kD, Cfg::kIsBf16>::template rs<true>(acc_dk[0], a_ds[kk], desc_mn_major<typename Layout::Q>(s_q, 16 * kk));
    wgmma_commit();
  }

  // Warpgroup wg's part of dQ (kCols columns) = dS.K, dS^T (s_ds: its 64-column block of the
  // part's queries) and K both [key][.]: MN-major A and B; or, swapped (80-query tiles), dQ^T
  // = K^T.dS^T, K MN-major as A, dS [query][key] K-major as B, staged transposed. Then dK's
  // product, so that dQ is staged in fp32 for the writer while dK runs (the dV group issued
  // before and the dQ group retire at wait<1>). `reused`: the boxes held the previous item's
  // part. The caller waits for dK.
  template <int kCols>
  static __device__ __forceinline__ void dq_product(const Layout& l, int wg, bool reused, u32 s_ds, u32 s_q,
                                                    u32 (&a_ds)[Split::kMT / 2][4],
                                                    typename Split::Accumulator& acc_dk) {
    using KV = typename Layout::KV;
    using DS = typename Layout::DS;
    static_assert(!kDqSwapped || kCols == 64, "swapped: a 64-column block of K per warpgroup");
    float dq[kDqSwapped ? Cfg::kBlockM / 8 : kCols / 8][4];
    const int col0 = kDqCol0(wg);
    const u32 s_k_cols = l.s_k + (col0 / 64) * KV::kBlockBytes + (col0 % 64) * 2;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
      if constexpr (kDqSwapped)
        Wgmma<Cfg::kBlockM, Cfg::kIsBf16>::template ss<true, false>(dq, desc_mn_major<KV>(s_k_cols, 16 * kk),
                                                                    desc_k_major<DS>(s_ds, 0, 16 * kk), kk > 0);
      else
        Wgmma<kCols, Cfg::kIsBf16>::template ss<true, true>(dq, desc_mn_major<DS>(s_ds, 16 * kk),
                                                            desc_mn_major<KV>(s_k_cols, 16 * kk), kk > 0);
    wgmma_commit();
    dk_product(s_q, a_ds, acc_dk);
    wgmma_wait<1>();
    wgmma_fence_operand(dq);
    if (reused) named_barrier_sync(Barriers::kDqEmpty0 + wg, kDqThreads);  // the writer read them out
    // The warp's 16 queries (swapped: head-dim columns) of the part's 64.
    const int warp_row0 = 16 * ((threadIdx.x >> 5) & 3);
    const auto box = [&](int j) { return l.dq_box(wg, col0 + kFlashDqBoxCols * j); };
    if constexpr (kDqSwapped)
      stage_dq_fragments_t<Cfg::kBlockM>(box, dq, warp_row0, threadIdx.x & 31);
    else
      stage_dq_fragments<kCols>(box, dq, warp_row0, threadIdx.x & 31);
  }

  // The warpgroup's staged dQ part to the writer warp.
  static __device__ __forceinline__ void hand_over_dq(int wg) {
    fence_async_shared();  // the bulk reductions read the boxes through the async proxy
    named_barrier_arrive(Barriers::kDqFull0 + wg, kDqThreads);
  }
};

}  // namespace flash
