// Shared-memory tile layouts of 16-bit elements, addressed by byte offsets: SmemTile
// for ldmatrix/mma.sync, WgmmaTile for wgmma's 128-byte swizzle. Both have the same
// chunk()/elem() interface, so the copies (tile/copy.cuh) work on either.
#pragma once

#include "arch/types.cuh"

namespace flash {

// A (kRows x kCols) tile. Rows are split in 16-byte chunks (8 elements). When a row holds a
// multiple of 8 chunks the chunk index is XOR-swizzled with (row % 8); otherwise
// each row is padded by one chunk. Either way the 8 rows an ldmatrix or a
// row-wise cp.async touches fall in 8 different bank groups.
template <int Rows, int Cols>
struct SmemTile {
  static_assert(Cols % 16 == 0, "tile width must be a multiple of the mma k-step");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kChunks = kCols / 8;
  static constexpr bool kSwizzled = kChunks % 8 == 0;
  static constexpr int kRowElems = kSwizzled ? kCols : kCols + 8;
  static constexpr int kBytes = kRows * kRowElems * 2;

  static __device__ __forceinline__ u32 chunk(int row, int c) {
    const int phys = kSwizzled ? (c ^ (row & 7)) : c;
    return static_cast<u32>((row * kRowElems + phys * 8) * 2);
  }
  static __device__ __forceinline__ u32 elem(int row, int col) { return chunk(row, col >> 3) + (col & 7) * 2; }
};

// A (kRows x kCols) tile in the layout wgmma reads with 128-byte swizzling: column blocks
// of 64 elements, each block kRows rows of 128 bytes, the 16-byte chunk index XOR-ed with
// (row % 8). The tile must start 1024-byte aligned.
template <int Rows, int Cols>
struct WgmmaTile {
  static_assert(Cols % 64 == 0 && Rows % 8 == 0, "wgmma tiles are 64-column blocks of 8-row atoms");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kChunks = Cols / 8;
  static constexpr int kBlockBytes = Rows * 128;  // one 64-column block
  static constexpr int kBytes = Rows * Cols * 2;

  static __device__ __forceinline__ u32 chunk(int row, int c) {
    return static_cast<u32>((c >> 3) * kBlockBytes + row * 128 + (((c & 7) ^ (row & 7)) << 4));
  }
  static __device__ __forceinline__ u32 elem(int row, int col) { return chunk(row, col >> 3) + (col & 7) * 2; }
};

// The tile a kernel's products read: wgmma's layout where the kernel uses wgmma, SmemTile
// (ldmatrix/mma.sync) otherwise.
template <bool kWgmma, int R, int C>
using KernelTile = typename Select<kWgmma, WgmmaTile<R, C>, SmemTile<R, C>>::type;

}  // namespace flash
