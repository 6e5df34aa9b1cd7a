// The mbarrier ring of the warp-specialised kernels (sm_90): a producer fills kStages
// shared-memory stages by TMA, kConsumers consumer warpgroups read them. Each stage has a
// `full` barrier (kProducerArrivals producer arrivals plus the stage's transaction bytes) and
// an `empty` barrier (kConsumerArrivals arrivals once the consumers are done with the stage:
// one per warpgroup when they read it only through wgmma, whose wait retires the whole
// warpgroup's reads; one per thread when they also load from it themselves, since an
// arrival releases its own thread's accesses). Producer and consumers walk the ring with a
// PipelineState each; a state's phase parity flips at every wrap. The producer starts at parity 1: waiting for the phase
// before a fresh barrier's first returns at once, so the first lap finds every stage free.
#pragma once

#include "arch/mbarrier.cuh"

namespace flash {

struct PipelineState {
  int index;
  u32 phase;

  __device__ __forceinline__ void advance(int stages) {
    if (++index == stages) {
      index = 0;
      phase ^= 1u;
    }
  }
};

// kProducerArrivals: 1 when one thread fills a stage by TMA alone; a producer warp that also
// writes part of the stage itself (st.shared) has each of its lanes arrive after its writes.
template <int kStages, int kConsumerArrivals, int kProducerArrivals = 1>
struct TmaPipeline {
  static constexpr int kBarrierBytes = 2 * kStages * 8;  // full[kStages], then empty[kStages]

  u32 full0;  // shared address of full[0]; empty[s] follows the full barriers

  __device__ __forceinline__ explicit TmaPipeline(u32 barriers) : full0(barriers) {}

  __device__ __forceinline__ u32 full(int s) const { return full0 + 8 * s; }
  __device__ __forceinline__ u32 empty(int s) const { return full0 + 8 * (kStages + s); }

  // By one thread before any use (then fence_mbarrier_init and a CTA barrier).
  __device__ __forceinline__ void init() const {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full(s), kProducerArrivals);
      mbarrier_init(empty(s), kConsumerArrivals);
    }
  }

  static __device__ __forceinline__ PipelineState producer_start() { return {0, 1u}; }
  static __device__ __forceinline__ PipelineState consumer_start() { return {0, 0u}; }

  // Producer: waits until stage st.index is free, then arms its full barrier for `bytes`;
  // returns the barrier the stage's TMA copies complete on.
  __device__ __forceinline__ u32 producer_acquire(const PipelineState& st, u32 bytes) const {
    mbarrier_wait(empty(st.index), st.phase);
    mbarrier_arrive_expect_tx(full(st.index), bytes);
    return full(st.index);
  }

  // A producer of several arrivals: every lane waits for the stage to be free, one announces
  // the TMA bytes (producer_expect, before issuing them), every lane arrives after its own writes.
  __device__ __forceinline__ void producer_wait(const PipelineState& st) const { mbarrier_wait(empty(st.index), st.phase); }
  __device__ __forceinline__ u32 producer_expect(const PipelineState& st, u32 bytes) const {
    mbarrier_expect_tx(full(st.index), bytes);
    return full(st.index);
  }
  __device__ __forceinline__ void producer_arrive(const PipelineState& st) const { mbarrier_arrive(full(st.index)); }

  // Consumer (every thread of the warpgroup): waits until stage st.index has landed.
  __device__ __forceinline__ void consumer_wait(const PipelineState& st) const { mbarrier_wait(full(st.index), st.phase); }

  // Consumer: done with stage st.index; the threads that stand for the consumers (one per
  // warpgroup, or every thread: `arrive`) free it.
  __device__ __forceinline__ void consumer_release(const PipelineState& st, bool arrive) const {
    if (arrive) mbarrier_arrive(empty(st.index));
  }
};

}  // namespace flash
