// Cooperative tile copies between global and shared memory, and register fragments
// into shared tiles. Global rows are `row_stride` elements apart and hold kCols valid
// columns; rows >= rows_valid and columns >= kCols are never read (loads zero-fill them)
// and never written. kVec: rows are 16-byte aligned (head_dim % 8 == 0), so loads are
// cp.async and stores 16 bytes wide; otherwise both are element-wise and synchronous.
#pragma once

#include "arch/cp_async.cuh"
#include "arch/ptx.cuh"

namespace flash {

// Global -> shared tile, all kThreads threads of the CTA taking part; row r is read from
// row(r) (a pointer to its first element), so that rows may be gathered (the GQA-packed
// decode tile: rows of several heads). With kVec the copy is asynchronous (join with
// cp_async_wait and a barrier).
template <class Tile, int kThreads, int kCols, bool kVec, class RowPtr>
__device__ __forceinline__ void load_rows(u32 smem, const RowPtr& row_ptr, int rows_valid, int tid) {
  constexpr int kTotal = Tile::kRows * Tile::kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int row = i / Tile::kChunks, c = i % Tile::kChunks;
    const bool row_ok = row < rows_valid;
    const u16* src = row_ptr(row) + c * 8;  // dereferenced only when row_ok
    if constexpr (kVec) {
      const bool valid = row_ok && c * 8 < kCols;
      cp_async16(smem + Tile::chunk(row, c), valid ? src : row_ptr(0), valid);
    } else {
      u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = c * 8 + 2 * e;
        const u32 lo = (row_ok && col < kCols) ? src[2 * e] : 0;
        const u32 hi = (row_ok && col + 1 < kCols) ? src[2 * e + 1] : 0;
        w[e] = lo | (hi << 16);
      }
      st_shared_v4(smem + Tile::chunk(row, c), make_uint4(w[0], w[1], w[2], w[3]));
    }
  }
}

// load_rows of rows `row_stride` elements apart from g.
template <class Tile, int kThreads, int kCols, bool kVec>
__device__ __forceinline__ void load_tile(u32 smem, const u16* g, i64 row_stride, int rows_valid, int tid) {
  load_rows<Tile, kThreads, kCols, kVec>(smem, [&](int row) { return g + row * row_stride; }, rows_valid, tid);
}

// Shared tile -> global, rows < rows_valid and columns < kCols only.
template <class Tile, int kThreads, int kCols, bool kVec>
__device__ __forceinline__ void store_tile(u16* g, i64 row_stride, u32 smem, int rows_valid, int tid) {
  constexpr int kTotal = Tile::kRows * Tile::kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int row = i / Tile::kChunks, c = i % Tile::kChunks;
    if (row >= rows_valid || c * 8 >= kCols) continue;
    const uint4 v = ld_shared_v4(smem + Tile::chunk(row, c));
    u16* dst = g + row * row_stride + c * 8;
    if constexpr (kVec) {
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (c * 8 + e < kCols) dst[e] = static_cast<u16>(w[e / 2] >> (16 * (e % 2)));
    }
  }
}

// K and V rows n0.. (rows_valid of them) -> a stage holding the K tile, then the V tile.
template <class KV, int kThreads, int kCols, bool kVec>
__device__ __forceinline__ void load_kv_tiles(u32 stage, const u16* k, i64 k_row_stride, const u16* v,
                                              i64 v_row_stride, int n0, int rows_valid, int tid) {
  load_tile<KV, kThreads, kCols, kVec>(stage, k + n0 * k_row_stride, k_row_stride, rows_valid, tid);
  load_tile<KV, kThreads, kCols, kVec>(stage + KV::kBytes, v + n0 * v_row_stride, v_row_stride, rows_valid, tid);
}

// K and V rows gathered one row at a time (a paged cache): rows(r) gives both rows' first
// elements {k, v} from one lookup, so the K tile goes to `s_k` and the V tile to `s_v` with
// the row computed once per chunk pair. Same zero-fill and kVec contract as load_rows.
template <class KV, int kThreads, int kCols, bool kVec, class RowPair>
__device__ __forceinline__ void load_kv_row_pairs(u32 s_k, u32 s_v, const RowPair& rows, int rows_valid, int tid) {
  constexpr int kTotal = KV::kRows * KV::kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int row = i / KV::kChunks, c = i % KV::kChunks;
    const auto kv = rows(row < rows_valid ? row : rows_valid - 1);  // past the keys: a valid row, not read
    const bool valid = row < rows_valid && c * 8 < kCols;
    if constexpr (kVec) {
      cp_async16(s_k + KV::chunk(row, c), kv.k + c * 8, valid);
      cp_async16(s_v + KV::chunk(row, c), kv.v + c * 8, valid);
    } else {
      u32 wk[4], wv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = c * 8 + 2 * e;
        const bool lo_ok = row < rows_valid && col < kCols, hi_ok = row < rows_valid && col + 1 < kCols;
        wk[e] = (lo_ok ? u32(kv.k[c * 8 + 2 * e]) : 0u) | ((hi_ok ? u32(kv.k[c * 8 + 2 * e + 1]) : 0u) << 16);
        wv[e] = (lo_ok ? u32(kv.v[c * 8 + 2 * e]) : 0u) | ((hi_ok ? u32(kv.v[c * 8 + 2 * e + 1]) : 0u) << 16);
      }
      st_shared_v4(s_k + KV::chunk(row, c), make_uint4(wk[0], wk[1], wk[2], wk[3]));
      st_shared_v4(s_v + KV::chunk(row, c), make_uint4(wv[0], wv[1], wv[2], wv[3]));
    }
  }
}

// The order in which load_kv_row_pairs' copies visit rows, seen from one warp: when a row's
// chunks fit a warp (kChunks divides 32) the warp copies kRowsPerIter rows per iteration, and
// all its rows (kWarpRows of them, at most 32) can each be named by one lane: lane j holds the
// warp's j-th row, row(warp, j). Then a gather looks up each row once, in one lane, and the
// copies fetch the place by a shuffle (load_kv_rows_by_lane) instead of once per chunk.
template <class KV, int kThreads>
struct WarpRowOrder {
  static constexpr int kRowsPerIter = KV::kChunks <= 32 ? 32 / KV::kChunks : 1;
  static constexpr int kIters = KV::kRows * KV::kChunks / kThreads;
  static constexpr int kWarpRows = kIters * kRowsPerIter;
  static constexpr bool kApplies =
      32 % KV::kChunks == 0 && kThreads % 32 == 0 && (KV::kRows * KV::kChunks) % kThreads == 0 && kWarpRows <= 32;

  // The tile row of the warp's j-th row (lanes j >= kWarpRows repeat the first ones).
  static __device__ __forceinline__ int row(int warp, int j) {
    j %= kWarpRows;
    return warp * kRowsPerIter + j / kRowsPerIter * (kThreads / KV::kChunks) + j % kRowsPerIter;
  }
};

// load_kv_row_pairs (kVec) with each row's place looked up by one lane: `mine` is the place
// (a struct of two ints: {page, row}) of this lane's row in WarpRowOrder, rows_at(place) the
// {k, v} row pointers there. All threads of every warp take part (shuffles).
template <class KV, int kThreads, int kCols, class Place, class RowsAt>
__device__ __forceinline__ void load_kv_rows_by_lane(u32 s_k, u32 s_v, Place mine, const RowsAt& rows_at,
                                                     int rows_valid, int tid) {
  using Order = WarpRowOrder<KV, kThreads>;
  static_assert(Order::kApplies, "a warp's rows are named by its lanes");
  const int lane = tid & 31;
#pragma unroll
  for (int it = 0; it < Order::kIters; ++it) {
    const int i = tid + it * kThreads;
    const int row = i / KV::kChunks, c = i % KV::kChunks;
    const int from = it * Order::kRowsPerIter + lane / KV::kChunks;  // the lane holding this row
    const Place at{__shfl_sync(0xffffffffu, mine.page, from), __shfl_sync(0xffffffffu, mine.row, from)};
    const auto kv = rows_at(at);  // rows past the keys: the last key's place, not read
    const bool valid = row < rows_valid && c * 8 < kCols;
    cp_async16(s_k + KV::chunk(row, c), kv.k + c * 8, valid);
    cp_async16(s_v + KV::chunk(row, c), kv.v + c * 8, valid);
  }
}

// Eight fp32 values rounded to 16 bits by Element into columns c*8.. (c*8 < kCols) of a global
// row, those below kCols; with kVec (kCols % 8 == 0) one 16-byte store.
template <class Element, int kCols, bool kVec>
__device__ __forceinline__ void store_row_chunk(u16* row, int c, const float (&x)[8]) {
  if constexpr (kVec) {
    *reinterpret_cast<uint4*>(row + c * 8) = make_uint4(Element::pack2(x[0], x[1]), Element::pack2(x[2], x[3]),
                                                        Element::pack2(x[4], x[5]), Element::pack2(x[6], x[7]));
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (c * 8 + e < kCols) row[c * 8 + e] = Element::from_float(x[e]);
  }
}

// Columns c*8.. (those below kCols) of a global row as fp32 (columns >= kCols read as 0);
// with kVec (kCols % 8 == 0, 16-byte aligned rows) one 16-byte load.
template <class Element, int kCols, bool kVec>
__device__ __forceinline__ void load_row_chunk(const u16* row, int c, float (&x)[8]) {
  if constexpr (kVec) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + c * 8);
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = Element::to_float(static_cast<u16>(w[i / 2] >> (16 * (i % 2))));
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = Element::to_float(c * 8 + i < kCols ? row[c * 8 + i] : u16(0));
  }
}

// Columns c*8.. (those below kCols) of global row `src` copied bit for bit to row `dst`.
template <int kCols, bool kVec>
__device__ __forceinline__ void copy_row_chunk(u16* dst, const u16* src, int c) {
  if constexpr (kVec) {
    *reinterpret_cast<uint4*>(dst + c * 8) = *reinterpret_cast<const uint4*>(src + c * 8);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (c * 8 + i < kCols) dst[c * 8 + i] = src[c * 8 + i];
  }
}

// C fragments (fp32, the mma.sync/wgmma accumulator layout) times `scale`, rounded to 16 bits
// by Element (Element16), into the shared tile: fragment (mt, dt) covers rows row0 + 16 mt..
// and columns col0 + 8 dt.. kScaled = false skips the multiplication.
template <class Element, class Tile, bool kScaled, int kRT, int kDT>
__device__ __forceinline__ void store_fragments(u32 s_tile, const float (&acc)[kRT][kDT][4], int row0, int col0,
                                                float scale, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float lo = acc[mt][dt][2 * hh], hi = acc[mt][dt][2 * hh + 1];
        st_shared_u32(s_tile + Tile::elem(row0 + 16 * mt + g + 8 * hh, col0 + 8 * dt + 2 * tq),
                      kScaled ? Element::pack2(lo * scale, hi * scale) : Element::pack2(lo, hi));
      }
}

}  // namespace flash
