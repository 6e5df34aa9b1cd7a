// The warp-specialised forward mainloop (sm_90a) for one Q tile of one (batch, head).
// Producer (one thread): Q once, then the visible K and V tiles, newest key tile first, by
// TMA into two mbarrier rings (V lags K by one tile, the order the consumers need them).
// Consumers (kConsumers warpgroups, 64 query rows each): S = Q.K^T and O += P.V by wgmma
// with P in registers, overlapped within the warpgroup: the scores of tile j are issued
// before the P.V of tile j+1, and the softmax of tile j runs while that P.V is in flight.
// With ping-pong the warpgroups also take turns issuing their products (named barriers),
// so one's softmax runs under the other's products. Persistent (Cfg::kPersistent), the CTA
// runs the mainloop once per work tile with its rings' states carried over, and each consumer
// warpgroup frees Q (`q_empty`) as soon as its last product reading it has retired: the next
// tile's Q and first K load under this one's last P.V and epilogue. O is staged in a tile of
// its own, or (Cfg::kOOverV, where that tile does not fit: d128 at 128 x 176, d256) over the V
// ring, FA3's arrangement: mma() then returns once every warpgroup's last P.V has retired, and
// the producer loads the next tile's first V only when the O store has read the staging
// (`o_empty`).
#pragma once

#include "arch/mbarrier.cuh"
#include "arch/named_barrier.cuh"
#include "arch/tma.cuh"
#include "arch/wgmma_sm90.cuh"
#include "attention/softcap.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "params/attention_params.h"
#include "params/kernel_traits.cuh"
#include "pipeline/tma_pipeline.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

// Named barriers of the warp-specialised forward (ids from kNamedBarrierFirstFree): one per
// consumer warpgroup for ping-pong, one per consumer warpgroup for its epilogue, and (O
// staged over the V ring) one over every consumer: the ring is no longer read.
template <int kConsumers>
struct FwdSm90Barriers {
  static constexpr int kScheduler = kNamedBarrierFirstFree;
  static constexpr int kEpilogue = kScheduler + kConsumers;
  static constexpr int kVRingRead = kEpilogue + kConsumers;
  static_assert(kVRingRead + 1 <= kNamedBarrierCount, "named barrier ids");
};

template <class Cfg>
struct FwdMainloopSm90 {
  static constexpr int kConsumers = Cfg::kBlockM / 64;  // warpgroups of 64 query rows
  static constexpr int kNT = Cfg::kBlockN / 8;
  static constexpr int kDT = Cfg::kHeadDimPadded / 8;
  static constexpr int kColBlocks = Cfg::kHeadDimCols / 64;  // TMA boxes of 64 columns per tile
  // Ping-pong (FA3's rule): at d > 128 O leaves too few registers for it to pay.
  static constexpr bool kPingPong = kConsumers >= 2 && Cfg::kHeadDimPadded <= 128;
  // Above d64, O takes each tile's correction right before the next P.V is issued and the P.V
  // is waited for only after the softmax (FA3's RescaleOBeforeGemm): +3-10 % at d128/d256. At
  // d64 (three warpgroups of 64 rows) the old order, rescale after the wait, is 2-7 % faster
  // (docs/perf-notes.md, "The forward's P.V under the softmax, measured").
  static constexpr bool kRescaleBeforePv = Cfg::kHeadDimPadded > 64;
  static_assert(Cfg::kBlockM % 64 == 0 && Cfg::kBlockN % 16 == 0 && Cfg::kBlockN <= 256, "wgmma tile shape");

  using Pipeline = TmaPipeline<Cfg::kStages, kConsumers>;  // one release per consumer warpgroup
  using Barriers = FwdSm90Barriers<kConsumers>;
  using Accumulator = float[1][kDT][4];
  using Ledger = SoftmaxLedger<1>;

  // Shared memory: the Q tile, kStages K tiles, kStages V tiles, (persistent) the O staging
  // tile unless O is staged over the V ring, then the mbarriers (Q's, the K ring's, the V
  // ring's; persistent: Q's `empty`, and O's over the V ring). Without kPersistent O is staged
  // in Q's tile. Tiles are 1024-byte multiples, so each stays aligned.
  // (compiler/shared_memory.cpp: the host's side, which also makes the kOOverV choice.)
  static_assert(!Cfg::kOOverV || Cfg::kPersistent, "O is staged over the V ring by the persistent form only");
  static constexpr bool kOApart = Cfg::kPersistent && !Cfg::kOOverV;
  struct Layout {
    using Q = typename Cfg::template Tile<Cfg::kBlockM, Cfg::kHeadDimCols>;
    using KV = typename Cfg::template Tile<Cfg::kBlockN, Cfg::kHeadDimCols>;
    static constexpr int kK = Q::kBytes;
    static constexpr int kV = kK + Cfg::kStages * KV::kBytes;
    static constexpr int kO = Cfg::kOOverV ? kV : kOApart ? kV + Cfg::kStages * KV::kBytes : 0;
    static constexpr int kQFull = kV + Cfg::kStages * KV::kBytes + (kOApart ? Q::kBytes : 0);
    static constexpr int kKRing = kQFull + 8;
    static constexpr int kVRing = kKRing + Pipeline::kBarrierBytes;
    static constexpr int kQEmpty = kVRing + Pipeline::kBarrierBytes;
    static constexpr int kOEmpty = kQEmpty + 8;
    static constexpr int kBytes = kQEmpty + (Cfg::kOOverV ? 16 : Cfg::kPersistent ? 8 : 0);
    static_assert(Q::kBytes % 1024 == 0 && KV::kBytes % 1024 == 0, "tiles keep 1024-byte alignment");
    static_assert(!Cfg::kOOverV || Q::kBytes <= Cfg::kStages * KV::kBytes, "O's staging fits the V ring");
  };

  // Where a role is in the rings and in the sequence of Q tiles (persistent: across work tiles).
  struct RoleState {
    PipelineState k, v;
    u32 q_tiles;  // Q tiles loaded (producer) or consumed (consumers) so far: q_full's and q_empty's parity
  };

  u32 s_q, s_k, s_v, s_o, q_full, q_empty, o_empty;
  Pipeline k_pipe, v_pipe;

  __device__ __forceinline__ explicit FwdMainloopSm90(u32 smem)
      : s_q(smem), s_k(smem + Layout::kK), s_v(smem + Layout::kV),
        s_o(smem + Layout::kO), q_full(smem + Layout::kQFull), q_empty(smem + Layout::kQEmpty),
        o_empty(smem + Layout::kOEmpty), k_pipe(smem + Layout::kKRing), v_pipe(smem + Layout::kVRing) {}

  // By one thread, before the CTA barrier that precedes the role split.
  __device__ __forceinline__ void init() const {
    mbarrier_init(q_full, 1);
    if constexpr (Cfg::kPersistent) {  // one release per warpgroup
      mbarrier_init(q_empty, kConsumers);
      if constexpr (Cfg::kOOverV) mbarrier_init(o_empty, kConsumers);
    }
    k_pipe.init();
    v_pipe.init();
    fence_mbarrier_init();
  }

  // ---- producer (one thread) ----
  __device__ __forceinline__ RoleState producer_start(const FlashAttentionParams& p) const {
    tma_prefetch_descriptor(&p.tma_q);
    tma_prefetch_descriptor(&p.tma_k);
    tma_prefetch_descriptor(&p.tma_v);
    return {Pipeline::producer_start(), Pipeline::producer_start(), 0};
  }

  // Q rows m0.. of head h (once the consumers have freed the previous Q tile), then the key
  // tiles n_end-1 down to n_begin of head h_kv; O staged over the V ring, the first V once
  // the previous tile's O has left it.
  __device__ __forceinline__ void load(const FlashAttentionParams& p, const typename Cfg::Offsets& off, int h, int h_kv,
                                       int m0, int n_begin, int n_end, RoleState& st) const {
    const int batch = off.tma_batch();
    // Each tile waits once on each `empty` barrier; the first (parity 1 on a fresh barrier)
    // returns at once.
    const u32 previous_parity = (st.q_tiles & 1u) ^ 1u;
    if constexpr (Cfg::kPersistent) mbarrier_wait(q_empty, previous_parity);
    ++st.q_tiles;
    mbarrier_arrive_expect_tx(q_full, Layout::Q::kBytes);
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb)
      tma_load_4d(s_q + cb * Layout::Q::kBlockBytes, &p.tma_q, q_full, 64 * cb, off.tma_q_row(m0), h, batch);
    PipelineState& k_st = st.k;
    PipelineState& v_st = st.v;
    if (n_begin < n_end) load_kv(p.tma_k, k_pipe, k_st, s_k, off, h_kv, n_end - 1);
    if constexpr (Cfg::kOOverV) mbarrier_wait(o_empty, previous_parity);  // also for a tile without keys
    for (int n = n_end - 2; n >= n_begin; --n) {
      load_kv(p.tma_k, k_pipe, k_st, s_k, off, h_kv, n);
      load_kv(p.tma_v, v_pipe, v_st, s_v, off, h_kv, n + 1);
    }
    if (n_begin < n_end) load_kv(p.tma_v, v_pipe, v_st, s_v, off, h_kv, n_begin);
  }

  // ---- consumer (one warpgroup, `wg` of kConsumers) ----
  static __device__ __forceinline__ RoleState consumer_start() {
    return {Pipeline::consumer_start(), Pipeline::consumer_start(), 0};
  }

  // Folds the key tiles n_end-1 .. n_begin into o and the ledger for the warpgroup's rows
  // (q_row0 of the tile whose first query is m0). o must be zero; it is left unnormalised.
  // With O staged over the V ring, it returns once no warpgroup reads the ring any more.
  template <class Vis>
  __device__ __forceinline__ void mma(const FlashAttentionParams& p, const Vis& vis, int m0, int rows_q, int n_begin,
                                      int n_end, int wg, Accumulator& o, Ledger& ledger, RoleState& st) const {
    const int lane = threadIdx.x & 31;
    const int q_row0 = 64 * wg;
    const int warp_row0 = q_row0 + 16 * ((threadIdx.x >> 5) & 3);
    const bool leader = (threadIdx.x & 127) == 0;  // frees the stages for the warpgroup
    const int wg_q1 = min(q_row0 + 64, rows_q);  // the warpgroup's valid rows end (tile-relative)
    const float softcap_pre = Cfg::kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
    mbarrier_wait(q_full, st.q_tiles & 1u);
    ++st.q_tiles;
    if (n_begin >= n_end) {
      release_q(leader);
      v_ring_read();
      return;
    }
    if constexpr (kPingPong)  // the last warpgroup lets the first one start
      if (wg == kConsumers - 1) named_barrier_arrive(Barriers::kScheduler, 256);

    float s[1][kNT][4];
    u32 pa[kNT / 2][4];  // P as the A operand of P.V
    PipelineState& k_st = st.k;
    PipelineState& v_st = st.v;
    auto scores_to_p = [&](int n, float (&corr)[1][2]) {
      const int n0 = n * Cfg::kBlockN;
      if constexpr (Cfg::kSoftcap) softcap_scores(s, softcap_pre, p.softcap);
      if (!vis.tile_visible(m0 + q_row0, m0 + wg_q1, n0, n0 + Cfg::kBlockN))
        mask_query_rows(s, vis, m0 + warp_row0, n0, lane);
      ledger.fold(s, p.scale_log2, corr);
    };

    // The newest key tile: scores alone.
    int n = n_end - 1;
    scheduler_wait(wg);
    k_pipe.consumer_wait(k_st);
    wgmma_fence();
    scores(s[0], s_k + k_st.index * Layout::KV::kBytes, q_row0);
    scheduler_pass(wg, false);  // the tail's P.V is this warpgroup's last turn
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    k_pipe.consumer_release(k_st, leader);
    k_st.advance(Cfg::kStages);
    if (n == n_begin) release_q(leader);  // the last product reading Q has retired
    float corr[1][2];
    scores_to_p(n, corr);
    // o is zero: nothing to rescale
    if constexpr (kRescaleBeforePv) corr[0][0] = corr[0][1] = 1.0f;
    to_a(pa, s[0]);

    // Steady state: the scores of tile n under the P.V of tile n + 1. O takes tile n + 1's
    // correction just before its P.V is issued (FA3's RescaleOBeforeGemm), so that nothing
    // but the P conversion waits for the P.V.
    for (n = n_end - 2; n >= n_begin; --n) {
      scheduler_wait(wg);
      k_pipe.consumer_wait(k_st);
      wgmma_fence();
      scores(s[0], s_k + k_st.index * Layout::KV::kBytes, q_row0);
      if constexpr (kRescaleBeforePv) {
        Ledger::rescale(o, corr);
        wgmma_fence();  // the rescaled O is the P.V's accumulator
      }
      v_pipe.consumer_wait(v_st);
      p_v(o[0], pa, s_v + v_st.index * Layout::KV::kBytes);
      scheduler_pass(wg, false);
      wgmma_wait<1>();
      wgmma_fence_operand(s);
      k_pipe.consumer_release(k_st, leader);
      k_st.advance(Cfg::kStages);
      if (n == n_begin) release_q(leader);
      scores_to_p(n, corr);
      // A basic-block boundary ptxas does not schedule across (the branch is never taken: n is
      // a tile index, below seqlen_k): without it ptxas hoists the P.V wait above the softmax
      // to interleave the P conversion with the exponentials, and the P.V no longer runs
      // under this warpgroup's softmax (docs/perf-notes.md, "Where the forward's P.V wait lands").
      if constexpr (kRescaleBeforePv)
        if (n == p.seqlen_k) __nanosleep(0);
      wgmma_wait<0>();
      wgmma_fence_operand(o);
      wgmma_fence_operand(pa);
      v_pipe.consumer_release(v_st, leader);
      v_st.advance(Cfg::kStages);
      if constexpr (!kRescaleBeforePv) Ledger::rescale(o, corr);
      to_a(pa, s[0]);
    }

    // The oldest tile's P.V.
    scheduler_wait(wg);
    v_pipe.consumer_wait(v_st);
    if constexpr (kRescaleBeforePv) Ledger::rescale(o, corr);
    wgmma_fence();
    p_v(o[0], pa, s_v + v_st.index * Layout::KV::kBytes);
    scheduler_pass(wg, true);
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    wgmma_fence_operand(pa);
    v_pipe.consumer_release(v_st, leader);
    v_st.advance(Cfg::kStages);  // persistent: the next tile's V starts at the next stage
    v_ring_read();
  }

  // O staged over the V ring, by the warpgroup's storing thread once its O store has read the
  // staging rows: the producer may load V over them.
  __device__ __forceinline__ void release_o(bool leader) const {
    if constexpr (Cfg::kOOverV)
      if (leader) mbarrier_arrive(o_empty);
  }

 private:
  // O staged over the V ring: every consumer warpgroup's products reading the ring have
  // retired, and every storing thread's previous O store has read the staging (it arrives
  // after its wait).
  static __device__ __forceinline__ void v_ring_read() {
    if constexpr (Cfg::kOOverV) named_barrier_sync(Barriers::kVRingRead, 128 * kConsumers);
  }

  // Persistent: the warpgroup is done with Q (its products reading it have retired; the
  // epilogue stages O elsewhere), so the producer may load the next tile's.
  __device__ __forceinline__ void release_q(bool leader) const {
    if constexpr (Cfg::kPersistent)
      if (leader) mbarrier_arrive(q_empty);
  }

  // Producer: key tile n into the ring's next stage (one TMA box per 64 columns; the full
  // box's bytes, zero-filled rows past the tensor's end included; rows past the sequence's
  // end are masked).
  __device__ __forceinline__ void load_kv(const FlashTensorMap& map, const Pipeline& pipe, PipelineState& st, u32 ring,
                                          const typename Cfg::Offsets& off, int h_kv, int n) const {
    const u32 bar = pipe.producer_acquire(st, Layout::KV::kBytes);
    const u32 dst = ring + st.index * Layout::KV::kBytes;
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb)
      tma_load_4d(dst + cb * Layout::KV::kBlockBytes, &map, bar, 64 * cb, off.tma_k_row(n * Cfg::kBlockN), h_kv,
                  off.tma_batch());
    st.advance(Cfg::kStages);
  }

  // Ping-pong: a warpgroup issues its products only in its turn, then hands the turn on.
  // Each turn barrier joins two warpgroups (256 threads): the one waiting for its turn and
  // the one handing it over. The last warpgroup skips its final hand-over, so every barrier
  // phase completes exactly.
  static __device__ __forceinline__ void scheduler_wait(int wg) {
    if constexpr (kPingPong) named_barrier_sync(Barriers::kScheduler + wg, 256);
  }
  static __device__ __forceinline__ void scheduler_pass(int wg, bool last) {
    if constexpr (kPingPong)
      if (!(last && wg == kConsumers - 1))
        named_barrier_arrive(Barriers::kScheduler + (wg + 1) % kConsumers, 256);
  }

  // S (64 x kBlockN) = Q rows q_row0.. . K^T, both K-major in shared memory; committed, not waited for.
  __device__ __forceinline__ void scores(float (&s)[kNT][4], u32 k_tile, int q_row0) const {
    using L = Layout;
#pragma unroll
    for (int kc = 0; kc < Cfg::kHeadDimPadded; kc += 16)
      Wgmma<Cfg::kBlockN, Cfg::kIsBf16>::template ss<false, false>(
          s, desc_k_major<typename L::Q>(s_q, q_row0, kc), desc_k_major<typename L::KV>(k_tile, 0, kc), kc > 0);
    wgmma_commit();
  }

  // O += P.V with P in registers and V MN-major in shared memory; committed, not waited for.
  static __device__ __forceinline__ void p_v(float (&o)[kDT][4], const u32 (&pa)[kNT / 2][4], u32 v_tile) {
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk)
      Wgmma<Cfg::kHeadDimPadded, Cfg::kIsBf16>::template rs<true>(o, pa[kk],
                                                                  desc_mn_major<typename Layout::KV>(v_tile, 16 * kk));
    wgmma_commit();
  }

  // P rounded to 16 bits: a 16-column slice of the S fragment is the A fragment of a k-step.
  static __device__ __forceinline__ void to_a(u32 (&pa)[kNT / 2][4], const float (&s)[kNT][4]) {
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) c_to_a<Cfg::kIsBf16>(pa[kk], s, kk);
  }
};

}  // namespace flash
