// The split-KV forward's offsets over a KV cache: q, o and lse as DenseOffsets; the keys of
// sequence b are its first seqused_k[b] (or seqlen_k) rows, dense or, kPaged, in pages that
// the block table names (params/attention_params.h, "KV cache"). Key rows are addressed one
// at a time (k_row, v_row), so the K/V tile loads gather them (tile/copy.cuh load_rows).
#pragma once

#include "arch/types.cuh"
#include "attention/offsets.cuh"
#include "params/attention_params.h"

namespace flash {

template <bool kPaged>
class KvCacheOffsets : public DenseOffsets {
 public:
  // The key count is loaded once: every key bound of the CTA derives from it.
  __device__ __forceinline__ KvCacheOffsets(const FlashAttentionParams& p, int batch)
      : DenseOffsets(p, batch),
        seqlen_k_(p.seqused_k == nullptr ? p.seqlen_k : min(max(p.seqused_k[batch], 0), p.seqlen_k)) {}

  __device__ __forceinline__ int seqlen_k() const { return seqlen_k_; }

  // Row `key` (0 <= key < seqlen_k()) of KV head h_kv of k and of v.
  __device__ __forceinline__ const u16* k_row(int h_kv, int key) const {
    return key_row(static_cast<const u16*>(p_.k), p_.k_stride, h_kv, key);
  }
  __device__ __forceinline__ const u16* v_row(int h_kv, int key) const {
    return key_row(static_cast<const u16*>(p_.v), p_.v_stride, h_kv, key);
  }

 private:
  __device__ __forceinline__ const u16* key_row(const u16* base, const FlashStrides& s, int h_kv, int key) const {
    if constexpr (kPaged) {
      const int slot = key / p_.page_size;
      // An entry outside the cache reads its first or last page, never memory it does not own.
      const int page = min(max(p_.block_table[b_ * p_.block_table_stride + slot], 0), p_.num_pages - 1);
      return base + page * s.batch + h_kv * s.head + (key - slot * p_.page_size) * s.row;
    } else {
      return rows(base, s, h_kv, key);
    }
  }

  int seqlen_k_;
};

}  // namespace flash
