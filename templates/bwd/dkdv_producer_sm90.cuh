// The producer warp of the warp-specialised dK/dV mainloops (sm_90a): K and V of the CTA's
// keys once by TMA, then per work item (query head of the GQA group, Q tile) a ring stage of
// Q and dO by TMA plus lse * log2e and D written by its lanes. Rows with no visible key or
// past seqlen_q get lse * log2e = +inf (P = 0) and D = 0.
#pragma once

#include "arch/fence.cuh"
#include "arch/mbarrier.cuh"
#include "arch/numeric.cuh"
#include "arch/ptx.cuh"
#include "arch/tma.cuh"
#include "attention/offsets.cuh"
#include "bwd/dkdv_layout.cuh"
#include "pipeline/tma_pipeline.cuh"

namespace flash {

// A warp-specialised mainloop's shared memory: its tiles (a DkdvLayout, with any tiles of its
// own after it), then the producer's mbarriers: K/V's (`kv_full`) and the ring's (a Pipeline
// whose full barriers expect the 32 lanes' arrivals besides the TMA bytes).
template <class Tiles, class Pipeline>
struct DkdvTmaLayout : Tiles {
  static constexpr int kKvFull = Tiles::kBytes;
  static constexpr int kRing = kKvFull + 8;
  static constexpr int kBytes = kRing + Pipeline::kBarrierBytes;

  u32 kv_full;
  Pipeline ring;

  __device__ __forceinline__ explicit DkdvTmaLayout(u32 smem) : Tiles(smem), kv_full(smem + kKvFull), ring(smem + kRing) {}
};

// Layout: a DkdvTmaLayout over Pipeline.
template <class Cfg, class Layout, class Pipeline>
struct DkdvTmaProducer {
  // By one thread, before the CTA barrier that precedes the role split.
  static __device__ __forceinline__ void init(const Layout& l) {
    mbarrier_init(l.kv_full, 1);
    l.ring.init();
    fence_mbarrier_init();
  }

  // All 32 lanes of the warp.
  static __device__ __forceinline__ void load(const FlashAttentionParams& p, const typename Cfg::Offsets& off,
                                              const Layout& l, int h_kv, int n0, const DkdvWorkItems<Cfg>& items) {
    constexpr int kColBlocks = Cfg::kHeadDimCols / 64;
    const int batch = off.tma_batch();
    using Q = typename Layout::Q;
    using KV = typename Layout::KV;
    const int lane = threadIdx.x & 31;
    const int total = items.total;
    if (total == 0) return;
    if (lane == 0) {
      tma_prefetch_descriptor(&p.tma_q);
      tma_prefetch_descriptor(&p.tma_do);
      mbarrier_arrive_expect_tx(l.kv_full, 2 * KV::kBytes);
#pragma unroll
      for (int cb = 0; cb < kColBlocks; ++cb) {
        tma_load_4d(l.s_k + cb * KV::kBlockBytes, &p.tma_k, l.kv_full, 64 * cb, off.tma_k_row(n0), h_kv, batch);
        tma_load_4d(l.s_v + cb * KV::kBlockBytes, &p.tma_v, l.kv_full, 64 * cb, off.tma_k_row(n0), h_kv, batch);
      }
    }
    PipelineState st = Pipeline::producer_start();
    for (int t = 0; t < total; ++t) {
      const int h = items.head(t), m0 = items.m0(t);
      l.ring.producer_wait(st);
      const u32 q = l.s_q(st.index), dout = l.s_do(st.index);
      if (lane == 0) {
        const u32 bar = l.ring.producer_expect(st, 2 * Q::kBytes);
#pragma unroll
        for (int cb = 0; cb < kColBlocks; ++cb) {
          tma_load_4d(q + cb * Q::kBlockBytes, &p.tma_q, bar, 64 * cb, off.tma_q_row(m0), h, batch);
          tma_load_4d(dout + cb * Q::kBlockBytes, &p.tma_do, bar, 64 * cb, off.tma_q_row(m0), h, batch);
        }
      }
      __syncwarp();
      const float* lse_rows = p.lse + off.lse_row(h) + m0;
      const float* dsum_rows = p.dsum + off.accum_row(h) + m0;
      const int rows = off.seqlen_q() - m0;
#pragma unroll
      for (int i = lane; i < Cfg::kBlockM; i += 32) {
        const bool valid = i < rows;
        const float lse = valid ? lse_rows[i] : neg_inf();
        st_shared_f32(l.s_lse(st.index) + 4 * i, lse == neg_inf() ? pos_inf() : lse * kLog2e);
        st_shared_f32(l.s_dsum(st.index) + 4 * i, valid ? dsum_rows[i] : 0.0f);
      }
      l.ring.producer_arrive(st);
      st.advance(Cfg::kStages);
    }
  }
};

}  // namespace flash
