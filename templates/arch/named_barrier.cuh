// Named barriers (bar.sync / bar.arrive with an id and a thread count): ordering between
// groups of warps, e.g. two consumer warpgroups taking turns (ping-pong), without stopping
// the producer warp. Id 0 is __syncthreads'; the kernels that use named barriers declare
// their ids from kNamedBarrierFirstFree up in one enum of their own.
#pragma once

namespace flash {

constexpr int kNamedBarrierFirstFree = 1;  // 0 is __syncthreads'
constexpr int kNamedBarrierCount = 16;     // ids 0..15 per CTA

// Not the .aligned forms (bar.sync, bar.arrive): those require every thread that meets the
// barrier to execute the same instruction, and the warp-specialised kernels meet one
// barrier from different code (each consumer warpgroup's own inlined copy of a step, the
// dQ writer warp's arrive): compute-sanitizer's synccheck reports "divergent threads" on
// the aligned forms there.

// Waits until `threads` threads (a multiple of 32) have arrived at `id`, counting this warp.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Arrives at `id` without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace flash
