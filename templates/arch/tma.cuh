// TMA (sm_90): bulk tensor copies between global memory, described by a CUtensorMap the
// host encodes (cuTensorMapEncodeTiled) and passes as a __grid_constant__ parameter, and
// shared memory. Loads complete on an mbarrier (transaction bytes); stores and reductions
// complete in bulk groups of the issuing thread. One thread issues; coordinates are
// elements, innermost first.
#pragma once

#include "arch/types.cuh"

namespace flash {

__device__ __forceinline__ u64 tensor_map_address(const void* tensor_map) {
  return reinterpret_cast<u64>(tensor_map);
}

// Pulls the descriptor into the cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_descriptor(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map_address(tensor_map)) : "memory");
}

// Global box at (c0, c1[, c2[, c3]]) -> shared `dst`, completing `bytes` on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(u32 dst, const void* tensor_map, u32 bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(dst),
      "l"(tensor_map_address(tensor_map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const void* tensor_map, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];" ::"r"(dst),
      "l"(tensor_map_address(tensor_map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(u32 dst, const void* tensor_map, u32 bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(dst),
      "l"(tensor_map_address(tensor_map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Shared `src` -> the global box at (c0, c1, c2, c3); out-of-bounds elements are not written.
__device__ __forceinline__ void tma_store_4d(const void* tensor_map, u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   tensor_map_address(tensor_map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// The global box at (c0, c1, c2, c3) += shared `src` (element-wise, fp32: dQ accumulation).
__device__ __forceinline__ void tma_reduce_add_4d(const void* tensor_map, u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::
                   "l"(tensor_map_address(tensor_map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most kPending bulk groups of this thread are incomplete (their writes done).
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}
// Waits until at most kPending bulk groups of this thread still read their shared source.
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

}  // namespace flash
