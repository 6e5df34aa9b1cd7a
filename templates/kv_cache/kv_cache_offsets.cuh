// The split-KV forward's offsets over a KV cache: q, o and lse as DenseOffsets; the keys of
// sequence b are its first seqused_k[b] (or seqlen_k) rows, dense or, kPaged, in pages that
// the block table names (params/attention_params.h, "KV cache"). Key rows are addressed one
// at a time (kv_rows), so the K/V tile loads gather them (tile/copy.cuh load_kv_row_pairs).
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
__device__ __forceinline__ PagePosition page_position(const FlashAttentionParams& p, int b, int pos) {
  const unsigned slot = static_cast<unsigned>(pos) / static_cast<unsigned>(p.page_size);
  return {p.block_table[b * p.block_table_stride + slot], pos - static_cast<int>(slot) * p.page_size};
}

template <bool kPaged>
class KvCacheOffsets : public DenseOffsets {
 public:
  // The key count is loaded once: every key bound of the CTA derives from it.
  __device__ __forceinline__ KvCacheOffsets(const FlashAttentionParams& p, int batch)
      : DenseOffsets(p, batch),
        seqlen_k_(p.seqused_k == nullptr ? p.seqlen_k : min(max(p.seqused_k[batch], 0), p.seqlen_k)) {}

  __device__ __forceinline__ int seqlen_k() const { return seqlen_k_; }

  struct KvRows {
    const u16 *k, *v;
  };
  // Row `key` (0 <= key < seqlen_k()) of KV head h_kv of k and of v: one page lookup for both.
  __device__ __forceinline__ KvRows kv_rows(int h_kv, int key) const {
    const u16* k = static_cast<const u16*>(p_.k);
    const u16* v = static_cast<const u16*>(p_.v);
    if constexpr (kPaged) {
      const PagePosition at = page_position(p_, b_, key);
      // An entry outside the cache reads its first or last page, never memory it does not own.
      const i64 page = min(max(at.page, 0), p_.num_pages - 1);
      return {k + page * p_.k_stride.batch + h_kv * p_.k_stride.head + at.row * p_.k_stride.row,
              v + page * p_.v_stride.batch + h_kv * p_.v_stride.head + at.row * p_.v_stride.row};
    } else {
      return {rows(k, p_.k_stride, h_kv, key), rows(v, p_.v_stride, h_kv, key)};
    }
  }

 private:
  int seqlen_k_;
};

}  // namespace flash
