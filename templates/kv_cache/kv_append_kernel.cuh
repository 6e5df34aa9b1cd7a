// KV append: the new rows of k and v written into a KV cache at each sequence's length, the
// keys (and optionally the queries) rotated on the way (params/attention_params.h, "KV
// append"). Runs before the decode or prefill forward over the cache on the same stream; the
// positions come from cache_seqlens on the device, so a captured graph replays with new
// lengths. Work items are 8-column chunks of rows in the order: the new keys, the new
// values, then the queries (batch, position, head; kVarlen: packed row, head), kBlockM rows
// per CTA; a thread owns a chunk (and, rotating in GPT-NeoX halves, its partner chunk), so q
// may be rotated in place.
#pragma once

#include "attention/rotary.cuh"
#include "kv_cache/kv_cache_offsets.cuh"
#include "params/attention_params.h"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg>
struct KvAppendKernel {
  using Element = typename Cfg::Element;
  static constexpr int kCols = Cfg::kHeadDim;
  static constexpr int kChunks = (kCols + 7) / 8;
  static constexpr bool kVec = Cfg::kVecLoad;
  static constexpr int kSharedBytes = 0;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    const i64 sequences = Cfg::kVarlen ? 1 : p.batch;  // packed: seqlen_new and seqlen_q count every row
    const i64 kv_rows = sequences * p.seqlen_new * p.heads_kv;
    const i64 q_rows = p.q == nullptr ? 0 : sequences * p.seqlen_q * p.heads_q;
    for (int item = threadIdx.x; item < Cfg::kBlockM * kChunks; item += Cfg::kThreads) {
      const i64 row = static_cast<i64>(blockIdx.x) * Cfg::kBlockM + item / kChunks;
      const int c = item % kChunks;
      if (row < 2 * kv_rows)
        append(p, row >= kv_rows, row >= kv_rows ? row - kv_rows : row, c);
      else if (row < 2 * kv_rows + q_rows)
        rotate_query(p, row - 2 * kv_rows, c);
    }
  }

 private:
  // Work row r of a tensor of `heads` heads: sequence b, its new row i, head h, and `row`, the
  // tensor's row (i; kVarlen: the packed row). b < 0: a packed row outside every sequence.
  struct RowIndex {
    int b, i, h, row;
  };
  static __device__ __forceinline__ RowIndex row_index(const FlashAttentionParams& p, i64 r, int seqlen, int heads) {
    const int t = static_cast<int>(r / heads), h = static_cast<int>(r % heads);
    if constexpr (Cfg::kVarlen) {
      const int b = sequence_of(p, t);
      return {b, b < 0 ? 0 : t - p.cu_seqlens_k[b], h, t};
    } else {
      return {t / seqlen, t % seqlen, h, t % seqlen};
    }
  }
  // The sequence whose packed rows hold row t: the last b with cu_seqlens_k[b] <= t, if t is
  // before its end; -1 otherwise.
  static __device__ __forceinline__ int sequence_of(const FlashAttentionParams& p, int t) {
    int lo = 0, hi = p.batch;  // cu_seqlens_k has batch + 1 entries
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens_k[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    return lo < p.batch && p.cu_seqlens_k[lo] <= t && t < p.cu_seqlens_k[lo + 1] ? lo : -1;
  }
  static __device__ __forceinline__ const u16* at(const void* base, const FlashStrides& s, RowIndex x) {
    return static_cast<const u16*>(base) + x.b * s.batch + static_cast<i64>(x.row) * s.row + x.h * s.head;
  }

  // Where position `pos` of sequence b, KV head h, lives in a cache; null where it must not
  // be written (a position past the cache, a page entry outside it).
  static __device__ __forceinline__ u16* cache_row(const FlashAttentionParams& p, bool is_v, int b, int h, int pos) {
    if (pos < 0 || pos >= p.seqlen_k) return nullptr;
    u16* cache = static_cast<u16*>(is_v ? p.v_cache : p.k_cache);
    const FlashStrides& s = is_v ? p.v_stride : p.k_stride;
    if constexpr (Cfg::kPaged) {
      const PagePosition at = page_position(p, b, pos);
      if (at.page < 0 || at.page >= p.num_pages) return nullptr;
      return cache + static_cast<i64>(at.page) * s.batch + at.row * s.row + h * s.head;
    } else {
      return cache + b * s.batch + static_cast<i64>(pos) * s.row + h * s.head;
    }
  }

  // Chunk c of `src` into `dst`, rotated at position `pos` where c lies in the rotary
  // columns (a position outside the tables makes those columns NaN), copied otherwise.
  static __device__ __forceinline__ void put(const FlashAttentionParams& p, u16* dst, const u16* src, int pos, int c,
                                             bool rotate) {
    if (!rotate || c * 8 >= p.rotary_dim) return copy_row_chunk<kCols, kVec>(dst, src, c);
    const int half = p.rotary_dim / 2;
    if (!p.rotary_interleaved && c * 8 >= half) return;  // the first half's thread writes it
    const bool inside = pos >= 0 && pos < p.rotary_rows;
    const u16* cs = static_cast<const u16*>(p.rotary_cos) + (inside ? pos * p.rotary_stride : 0);
    const u16* sn = static_cast<const u16*>(p.rotary_sin) + (inside ? pos * p.rotary_stride : 0);
    float x[8];
    load_row_chunk<Element, kCols, kVec>(src, c, x);
    if (p.rotary_interleaved) {
      Rotary<Element>::rotate_pairs(x, cs, sn, c);
    } else {
      float y[8];
      load_row_chunk<Element, kCols, kVec>(src, c + half / 8, y);
      Rotary<Element>::rotate_halves(x, y, cs, sn, c);
      if (!inside)
        for (float& e : y) e = __int_as_float(0x7fc00000);
      store_row_chunk<Element, kCols, kVec>(dst, c + half / 8, y);
    }
    if (!inside)
      for (float& e : x) e = __int_as_float(0x7fc00000);
    store_row_chunk<Element, kCols, kVec>(dst, c, x);
  }

  static __device__ __forceinline__ void append(const FlashAttentionParams& p, bool is_v, i64 r, int c) {
    const RowIndex x = row_index(p, r, p.seqlen_new, p.heads_kv);
    if (x.b < 0) return;
    const int pos = p.cache_seqlens[x.b] + x.i;
    u16* dst = cache_row(p, is_v, x.b, x.h, pos);
    if (dst == nullptr) return;
    const u16* src = is_v ? at(p.v_new, p.v_new_stride, x) : at(p.k_new, p.k_new_stride, x);
    put(p, dst, src, pos, c, !is_v && p.rotary_dim > 0);
  }

  static __device__ __forceinline__ void rotate_query(const FlashAttentionParams& p, i64 r, int c) {
    const RowIndex x = row_index(p, r, p.seqlen_q, p.heads_q);
    if (x.b < 0) return;
    const int pos = p.cache_seqlens[x.b] + (p.rotary_q_consecutive ? x.i : 0);
    u16* dst = const_cast<u16*>(at(p.o, p.o_stride, x));
    put(p, dst, at(p.q, p.q_stride, x), pos, c, true);
  }
};

}  // namespace flash
