// Hopper warpgroup matrix products (sm_90a): wgmma.mma_async m64nNk16 with fp32
// accumulators, operands in shared memory (128-byte-swizzled tiles, described by a
// 64-bit matrix descriptor) or, for A, in registers. A warpgroup (4 warps) computes a
// 64 x N block; warp w of the group owns rows 16w..16w+15 and holds them in the same
// C-fragment layout as mma.sync (float d[N/8][4]), so the softmax code is shared.
#pragma once

#include "arch/types.cuh"
#include "arch/wgmma_desc.cuh"         // the operands' matrix descriptors
#include "arch/wgmma_sm90_shapes.cuh"  // Wgmma<N, kIsBf16>: ss() and rs() per width N

namespace flash {

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
