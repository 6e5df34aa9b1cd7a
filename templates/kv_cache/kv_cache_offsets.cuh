// The split-KV forward's offsets over a KV cache: q, o and lse as DenseOffsets or, kVarlen,
// packed by cu_seqlens_q (PackedQueryRows); the keys of sequence b are its first seqused_k[b]
// (or seqlen_k) rows, in row b of the cache or, kPaged, in pages that the block table names
// (params/attention_params.h, "KV cache"). Key rows are addressed one at a time (kv_rows), so
// the K/V tile loads gather them (tile/copy.cuh load_kv_row_pairs).
#pragma once

#include "arch/types.cuh"
#include "attention/offsets.cuh"
#include "params/attention_params.h"

namespace flash {

// Where position `pos` (>= 0) of sequence b lives in a paged cache: row `row` of the page the
// block table names. The entry is returned as it is: what one outside [0, num_pages) means is
// the caller's (a read clamps it, the KV append skips the row).
struct PagePosition {
  int page, row;
};
// The page the block table names for slot `slot` (keys [slot, slot + 1) x page_size) of sequence b.
__device__ __forceinline__ int slot_page(const FlashAttentionParams& p, int b, int slot) {
  return p.block_table[b * p.block_table_stride + slot];
}
__device__ __forceinline__ PagePosition page_position(const FlashAttentionParams& p, int b, int pos) {
  const unsigned slot = static_cast<unsigned>(pos) / static_cast<unsigned>(p.page_size);
  return {slot_page(p, b, static_cast<int>(slot)), pos - static_cast<int>(slot) * p.page_size};
}

// Queries packed by cu_seqlens_q over a KV cache (a prefill chunk or decode step of each
// sequence in one call): sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o
// (clamped as VarlenRows clamps them), lse is (heads_q, total_q), and its keys are row b of a
// dense cache (k_rows). The start and length are loaded once.
class PackedQueryRows {
 public:
  __device__ __forceinline__ PackedQueryRows(const FlashAttentionParams& p, int batch) : p_(p), b_(batch) {
    packed_range(p.cu_seqlens_q, batch, p.total_q, p.seqlen_q, start_q_, seqlen_q_);
  }

  __device__ __forceinline__ int seqlen_q() const { return seqlen_q_; }
  __device__ __forceinline__ int seqlen_k() const { return p_.seqlen_k; }

  template <class T>
  __device__ __forceinline__ T* q_rows(T* base, const FlashStrides& s, int h, int row) const {
    return base + h * s.head + static_cast<i64>(start_q_ + row) * s.row;
  }
  template <class T>
  __device__ __forceinline__ T* k_rows(T* base, const FlashStrides& s, int h, int row) const {
    return base + b_ * s.batch + h * s.head + row * s.row;
  }

  __device__ __forceinline__ i64 lse_row(int h) const { return static_cast<i64>(h) * p_.total_q + start_q_; }
  static __device__ __forceinline__ i64 lse_rows(const FlashAttentionParams& p) {
    return static_cast<i64>(p.heads_q) * p.total_q;
  }

 protected:
  const FlashAttentionParams& p_;
  int b_;

 private:
  int start_q_, seqlen_q_;
};

template <bool kPaged, bool kVarlen = false>
class KvCacheOffsets : public TensorRows<typename Select<kVarlen, PackedQueryRows, DenseRows>::type> {
  using Base = TensorRows<typename Select<kVarlen, PackedQueryRows, DenseRows>::type>;

 public:
  // The key count is loaded once: every key bound of the CTA derives from it.
  __device__ __forceinline__ KvCacheOffsets(const FlashAttentionParams& p, int batch)
      : Base(p, batch),
        seqlen_k_(p.seqused_k == nullptr ? p.seqlen_k : min(max(p.seqused_k[batch], 0), p.seqlen_k)) {}

  __device__ __forceinline__ int seqlen_k() const { return seqlen_k_; }

  struct KvRows {
    const u16 *k, *v;
  };
  // Row `key` (0 <= key < seqlen_k()) of KV head h_kv of k and of v: one page lookup for both.
  __device__ __forceinline__ KvRows kv_rows(int h_kv, int key) const {
    if constexpr (kPaged) {
      return kv_rows_at(h_kv, key_page(key));
    } else {
      const FlashAttentionParams& p = this->p_;
      return {this->k_rows(static_cast<const u16*>(p.k), p.k_stride, h_kv, key),
              this->k_rows(static_cast<const u16*>(p.v), p.v_stride, h_kv, key)};
    }
  }

  // Paged: where key `key` (>= 0) lives, the block-table lookup alone (a key past the keys
  // looks up the last one: never a slot beyond the sequence's). Split from kv_rows_at so that
  // a loader can look up a tile ahead and hand the places between lanes.
  __device__ __forceinline__ PagePosition key_page(int key) const {
    return page_position(this->p_, this->b_, min(key, seqlen_k_ - 1));
  }
  // Paged: the page of slot `slot` of the sequence's keys: key_page's lookup without the division.
  __device__ __forceinline__ int slot_page(int slot) const { return flash::slot_page(this->p_, this->b_, slot); }
  // Paged: the K and V rows at `at` (a key_page result) of KV head h_kv.
  __device__ __forceinline__ KvRows kv_rows_at(int h_kv, PagePosition at) const {
    const FlashAttentionParams& p = this->p_;
    // An entry outside the cache reads its first or last page, never memory it does not own.
    const i64 page = min(max(at.page, 0), p.num_pages - 1);
    return {static_cast<const u16*>(p.k) + page * p.k_stride.batch + h_kv * p.k_stride.head + at.row * p.k_stride.row,
            static_cast<const u16*>(p.v) + page * p.v_stride.batch + h_kv * p.v_stride.head + at.row * p.v_stride.row};
  }

 private:
  int seqlen_k_;
};

}  // namespace flash
