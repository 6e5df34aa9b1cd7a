// Memory movement: shared-memory tile layouts and cooperative global <-> shared
// tile copies (cp.async with zero fill out of bounds, or element-wise for unaligned rows).
namespace flash {

// Type selection without <type_traits> (the generated source includes no headers).
template <bool kFirst, class A, class B>
struct Select {
  using type = A;
};
template <class A, class B>
struct Select<false, A, B> {
  using type = B;
};

// A (kRows x kCols) tile of 16-bit elements in shared memory, addressed by byte
// offsets. Rows are split in 16-byte chunks (8 elements). When a row holds a
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

// Global (rows of `row_stride` elements, kHeadDim valid columns) -> shared tile.
// Rows >= rows_valid and columns >= kHeadDim are zero-filled. With kVecLoad the
// copy is asynchronous (cp.async, join with cp_async_wait); without it (head_dim
// not a multiple of 8: rows are not 16-byte aligned) it is element-wise and synchronous.
template <class Tile, int kThreads>
__device__ __forceinline__ void load_tile(u32 smem, const u16* g, i64 row_stride, int rows_valid, int tid) {
  constexpr int kTotal = Tile::kRows * Tile::kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int row = i / Tile::kChunks, c = i % Tile::kChunks;
    const u16* src = g + row * row_stride + c * 8;
    if constexpr (kVecLoad) {
      const bool valid = row < rows_valid && c * 8 < kHeadDim;
      cp_async16(smem + Tile::chunk(row, c), valid ? src : g, valid);
    } else {
      u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = c * 8 + 2 * e;
        const u32 lo = (row < rows_valid && col < kHeadDim) ? src[2 * e] : 0;
        const u32 hi = (row < rows_valid && col + 1 < kHeadDim) ? src[2 * e + 1] : 0;
        w[e] = lo | (hi << 16);
      }
      st_shared_v4(smem + Tile::chunk(row, c), make_uint4(w[0], w[1], w[2], w[3]));
    }
  }
}

// Shared tile -> global, rows < rows_valid and columns < kHeadDim only.
template <class Tile, int kThreads>
__device__ __forceinline__ void store_tile(u16* g, i64 row_stride, u32 smem, int rows_valid, int tid) {
  constexpr int kTotal = Tile::kRows * Tile::kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int row = i / Tile::kChunks, c = i % Tile::kChunks;
    if (row >= rows_valid || c * 8 >= kHeadDim) continue;
    const uint4 v = ld_shared_v4(smem + Tile::chunk(row, c));
    u16* dst = g + row * row_stride + c * 8;
    if constexpr (kVecLoad) {
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (c * 8 + e < kHeadDim) dst[e] = static_cast<u16>(w[e / 2] >> (16 * (e % 2)));
    }
  }
}

}  // namespace flash
