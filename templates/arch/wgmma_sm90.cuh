// Hopper warpgroup matrix products (sm_90a): wgmma.mma_async m64nNk16 with fp32
// accumulators, operands in shared memory (128-byte-swizzled tiles, described by a
// 64-bit matrix descriptor) or, for A, in registers. A warpgroup (4 warps) computes a
// 64 x N block; warp w of the group owns rows 16w..16w+15 and holds them in the same
// C-fragment layout as mma.sync (float d[N/8][4]), so the softmax code is shared.
#pragma once

#include "arch/types.cuh"
#include "arch/wgmma_sm90_shapes.cuh"  // Wgmma<N, kIsBf16>: ss() and rs() per width N

namespace flash {

// Matrix descriptor (PTX ISA, "matrix descriptor format"): start address, leading and
// stride byte offsets (all >> 4), 128-byte swizzle mode; the start moved by `offset` bytes.
// Shared-memory addresses stay below 2^18, so the 14-bit start field never carries: moving the
// start is an add, and a product's k-steps cost one uniform add each instead of the four or five
// of rebuilding the descriptor from its address (ptxas cannot see that the address is a multiple
// of 16 below 2^18). The add is to the whole 64-bit descriptor, which ptxas writes straight into
// the uniform register pair the HGMMA reads (UIADD3.64); a 32-bit add to the low word cost a UMOV
// of the unchanged high word besides (docs/perf-notes.md, "The descriptor add made 64-bit").
__device__ __forceinline__ unsigned long long wgmma_desc(u32 addr, u32 leading_bytes, u32 stride_bytes, u32 offset = 0) {
  const u32 lo = (addr >> 4) | ((leading_bytes >> 4) << 16);
  const u32 hi = (stride_bytes >> 4) | (1u << 30);
  return ((static_cast<unsigned long long>(hi) << 32) | lo) + (offset >> 4);
}

// K-major operand (rows = M or N, contiguous k): the 16 k-columns k0..k0+15 of rows row0...
// Inside a 64-column block a k-step moves the start by 32 bytes; 8-row atoms are 1024 bytes apart.
template <class Tile>
__device__ __forceinline__ unsigned long long desc_k_major(u32 tile, int row0, int k0) {
  return wgmma_desc(tile, 16, 1024, (k0 >> 6) * Tile::kBlockBytes + row0 * 128 + ((k0 & 63) << 1));
}

// MN-major B operand (rows = k, contiguous n; V for P.V): k rows k0..k0+15, every n.
// Leading offset: from one 64-column block to the next; stride: from 8 k-rows to the next 8.
template <class Tile>
__device__ __forceinline__ unsigned long long desc_mn_major(u32 tile, int k0) {
  return wgmma_desc(tile, Tile::kBlockBytes, 1024, k0 * 128);
}

// stmatrix (sm_90): four 8x8 16-bit matrices from their mma fragments r[0..3] (thread t holds
// row t / 4, columns 2 (t % 4) + 0, 1 of each); lane L gives the address of row L % 8 of
// matrix L / 8. One instruction where element-wise stores take four, and one address each.
__device__ __forceinline__ void stmatrix_x4(u32 addr, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// The same, each matrix stored transposed (.trans): lane L gives the address of row L % 8 of
// matrix L / 8 as stored, i.e. of its column L % 8 as held.
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Compiler fences on registers an asynchronous wgmma reads or writes: placed right after the
// wgmma_wait that retires it, they keep the compiler from reading an accumulator before the
// wait, or from giving an A operand's registers to other values while the wgmma still reads them.
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void wgmma_fence_operand(u32& r) { asm volatile("" : "+r"(r)::"memory"); }
template <class T, int N>
__device__ __forceinline__ void wgmma_fence_operand(T (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) wgmma_fence_operand(r[i]);
}

}  // namespace flash
