// The multistage cp.async ring of the kernels that stream tiles through shared memory
// (forward: K/V; dK/dV: Q, dO, lse, D; dQ: K/V). A loop runs over items [begin, end) (tile
// indices); item i lives in stage (i - begin) % kStages. One barrier per item: after it,
// item i has landed and every thread is past item i - 1, whose stage is refilled with item
// i + kStages - 1. With one stage the item is loaded at the top and a second barrier
// (release) ends the iteration.
//
// `load(item, stage)` is the producer: it issues the item's copies (cp.async, all threads);
// the pipeline commits them as one group per item. (The loop runs over the items themselves,
// not over 0..end-begin: the latter costs the d64 forward 3 registers and a spill.)
#pragma once

#include "arch/cp_async.cuh"
#include "arch/fence.cuh"

namespace flash {

// kAsyncProxy: the consumers read the stages through the async proxy (wgmma), so the
// copies are fenced into it before the barrier.
template <int kStages, bool kAsyncProxy>
struct CpAsyncPipeline {
  static __device__ __forceinline__ int stage(int item, int begin) { return (item - begin) % kStages; }

  // Before the loop: items begin..begin+kStages-2 (those below `end`).
  template <class Load>
  static __device__ __forceinline__ void prologue(int begin, int end, const Load& load) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (begin + s < end) load(begin + s, s);
      cp_async_commit();
    }
  }

  // Top of the iteration of `item`: it is in stage(item, begin) for every thread once this returns.
  template <class Load>
  static __device__ __forceinline__ void acquire(int item, int begin, int end, const Load& load) {
    if constexpr (kStages == 1) {
      load(item, 0);
      cp_async_commit();
    }
    cp_async_wait<(kStages > 1 ? kStages - 2 : 0)>();
    if constexpr (kAsyncProxy) fence_async_shared();
    __syncthreads();
    if constexpr (kStages > 1) {
      const int ahead = item + kStages - 1;
      if (ahead < end) load(ahead, (item - begin + kStages - 1) % kStages);
      cp_async_commit();
    }
  }

  // End of an iteration: with one stage, the next acquire overwrites it.
  static __device__ __forceinline__ void release() {
    if constexpr (kStages == 1) __syncthreads();
  }

  // After the loop: every copy has landed (also those issued before it, when it ran zero
  // times) and every thread is done with the stages.
  static __device__ __forceinline__ void drain() {
    cp_async_wait<0>();
    __syncthreads();
  }
};

}  // namespace flash
