// Warp-level tile products on mma.sync m16n8k16 (sm_80+; 16-bit in, fp32 accumulate),
// operand fragments loaded from shared tiles with ldmatrix. kIsBf16 picks the input type.
//
// Fragment layouts (lane = 4 * g + t):
//   A 16x16 (row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B 16x8  (k x n):     b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g)
//   C 16x8  (fp32):      c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1)
// A C fragment pair (two adjacent n8 tiles) is, once rounded to 16 bits, the A
// fragment of the next product (P -> P.V without a shared-memory round trip).
#pragma once

#include "arch/mma_sm80.cuh"
#include "arch/numeric.cuh"

namespace flash {

// A fragment (rows row0.., k col0..) of a tile stored [row][k].
template <class Tile>
__device__ __forceinline__ void load_a(u32 (&a)[4], u32 tile, int row0, int col0, int lane) {
  ldmatrix_x4(a, tile + Tile::chunk(row0 + (lane & 15), (col0 >> 3) + (lane >> 4)));
}

// A fragment (rows row0.., k col0..) of a tile stored transposed, [k][row].
template <class Tile>
__device__ __forceinline__ void load_a_trans(u32 (&a)[4], u32 tile, int row0, int k0, int lane) {
  ldmatrix_x4_trans(a, tile + Tile::chunk(k0 + (lane & 7) + ((lane >> 4) << 3), (row0 >> 3) + ((lane >> 3) & 1)));
}

// B fragments of the two n8 tiles n0 and n0+8 at k0, from a tile stored [n][k]
// (K for Q.K^T): b[0] = {b0, b1} of tile n0, b[1] of tile n0+8.
template <class Tile>
__device__ __forceinline__ void load_b_nk(u32 (&b)[4], u32 tile, int n0, int k0, int lane) {
  ldmatrix_x4(b, tile + Tile::chunk(n0 + (lane & 7) + ((lane >> 4) << 3), (k0 >> 3) + ((lane >> 3) & 1)));
}

// The same two B fragments from a tile stored [k][n] (V for P.V).
template <class Tile>
__device__ __forceinline__ void load_b_kn(u32 (&b)[4], u32 tile, int k0, int n0, int lane) {
  ldmatrix_x4_trans(b, tile + Tile::chunk(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), (n0 >> 3) + (lane >> 4)));
}

// The B fragment of the single n8 tile n0 at k0, from a tile stored [k][n].
template <class Tile>
__device__ __forceinline__ void load_b_kn_single(u32 (&b)[2], u32 tile, int k0, int n0, int lane) {
  ldmatrix_x2_trans(b, tile + Tile::chunk(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), n0 >> 3));
}

// acc[kRowTiles][kNTiles] += A (rows from `a_tile`, stored [row][k]) . B (stored [n][k]),
// over k = 0..kK. Rows start at row0, n at n0 (kNTiles n8 tiles, even).
template <bool kIsBf16, int kRowTiles, int kNTiles, int kK, class ATile, class BTile>
__device__ __forceinline__ void mma_rows_nk(float (&acc)[kRowTiles][kNTiles][4], u32 a_tile, int row0, u32 b_tile, int n0,
                                            int lane) {
  // Long contractions (head dim > 128) stay rolled: fully unrolled, ptxas hoists every
  // fragment load ahead of the mma chain and spills. The accumulators index with constants either way.
#pragma unroll(kK <= 128 ? kK / 16 : 1)
  for (int k = 0; k < kK; k += 16) {
    u32 a[kRowTiles][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) load_a<ATile>(a[mt], a_tile, row0 + 16 * mt, k, lane);
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      u32 b[4];
      load_b_nk<BTile>(b, b_tile, n0 + 16 * np, k, lane);
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        mma_16816<kIsBf16>(acc[mt][2 * np], a[mt], b[0], b[1]);
        mma_16816<kIsBf16>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// A fragment for k-slice kk (16 columns) from fp32 C fragments held in registers.
template <bool kIsBf16, int kNTiles>
__device__ __forceinline__ void c_to_a(u32 (&a)[4], const float (&c)[kNTiles][4], int kk) {
  a[0] = Element16<kIsBf16>::pack2(c[2 * kk][0], c[2 * kk][1]);
  a[1] = Element16<kIsBf16>::pack2(c[2 * kk][2], c[2 * kk][3]);
  a[2] = Element16<kIsBf16>::pack2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = Element16<kIsBf16>::pack2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc[kRowTiles][kDTiles] += A . B over k = k0..k0 + 16*kKSteps, with A given per k-step
// as fragments a[kRowTiles][kKSteps] and B stored [k][n] (columns n0..n0 + 8*kDTiles; an
// odd kDTiles ends with a single n8 tile).
template <bool kIsBf16, int kRowTiles, int kKSteps, int kDTiles, class BTile>
__device__ __forceinline__ void mma_frags_kn(float (&acc)[kRowTiles][kDTiles][4], const u32 (&a)[kRowTiles][kKSteps][4],
                                             u32 b_tile, int k0, int n0, int lane) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
    for (int dp = 0; dp < kDTiles / 2; ++dp) {
      u32 b[4];
      load_b_kn<BTile>(b, b_tile, k0 + 16 * kk, n0 + 16 * dp, lane);
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        mma_16816<kIsBf16>(acc[mt][2 * dp], a[mt][kk], b[0], b[1]);
        mma_16816<kIsBf16>(acc[mt][2 * dp + 1], a[mt][kk], b[2], b[3]);
      }
    }
    if constexpr (kDTiles % 2 == 1) {
      u32 b[2];
      load_b_kn_single<BTile>(b, b_tile, k0 + 16 * kk, n0 + 8 * (kDTiles - 1), lane);
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) mma_16816<kIsBf16>(acc[mt][kDTiles - 1], a[mt][kk], b[0], b[1]);
    }
  }
}

// acc[kRowTiles][kDTiles] += P . B with P in registers (C layout, kPTiles n8 tiles wide,
// rounded to 16 bits here) and B stored [k][n].
template <bool kIsBf16, int kRowTiles, int kPTiles, int kDTiles, class BTile>
__device__ __forceinline__ void mma_regs_kn(float (&acc)[kRowTiles][kDTiles][4], const float (&p)[kRowTiles][kPTiles][4],
                                            u32 b_tile, int n0, int lane) {
  u32 a[kRowTiles][kPTiles / 2][4];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
    for (int kk = 0; kk < kPTiles / 2; ++kk) c_to_a<kIsBf16, kPTiles>(a[mt][kk], p[mt], kk);
  mma_frags_kn<kIsBf16, kRowTiles, kPTiles / 2, kDTiles, BTile>(acc, a, b_tile, 0, n0, lane);
}

template <int kRows, int kCols>
__device__ __forceinline__ void zero(float (&acc)[kRows][kCols][4]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

}  // namespace flash
