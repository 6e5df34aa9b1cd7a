// Matrix descriptors of wgmma's shared-memory operands (sm_90a): plain arithmetic, no PTX,
// so the CPU emulator (tests/compiler/emulator) decodes the same descriptors the kernels build.
#pragma once

#include "arch/types.cuh"

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

}  // namespace flash
