// mbarrier (sm_90): a 64-bit barrier object in shared memory that completes a phase when
// its expected arrivals have arrived and its expected transaction bytes (TMA copies that
// signal it) have landed. Phases alternate parity 0, 1, 0, ...: a consumer waits for the
// parity of the phase it needs; a producer re-arms the barrier for the next phase.
#pragma once

#include "arch/types.cuh"

namespace flash {

// Before any use, by one thread; fence_mbarrier_init then a CTA barrier make it visible.
__device__ __forceinline__ void mbarrier_init(u32 bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// One arrival that also expects `bytes` more transaction bytes in this phase (the TMA
// copies issued against the barrier).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Expects `bytes` more transaction bytes in this phase without arriving (when the phase's
// arrivals come from other threads, or later).
__device__ __forceinline__ void mbarrier_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// True once the phase of `parity` has completed (a bounded, hardware-suspended wait).
__device__ __forceinline__ bool mbarrier_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(u32 bar, u32 parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

}  // namespace flash
