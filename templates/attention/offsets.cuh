// Where a (batch, head) slice of each tensor starts and which sequence lengths it has:
// the one place that turns the parameter block's strides into addresses. Dense batches
// here; a KV cache's key counts and pages are KvCacheOffsets (attention/kv_cache_offsets.cuh),
// per-sequence offsets (cu_seqlens) another offsets type with the same interface.
#pragma once

#include "arch/types.cuh"
#include "params/attention_params.h"

namespace flash {

// Every value is read from the parameter block where it is used (kernel parameters are
// constant-bank operands on the GPU), so that nothing here holds registers across a mainloop.
class DenseOffsets {
 public:
  __device__ __forceinline__ DenseOffsets(const FlashAttentionParams& p, int batch) : p_(p), b_(batch) {}

  __device__ __forceinline__ int seqlen_q() const { return p_.seqlen_q; }
  __device__ __forceinline__ int seqlen_k() const { return p_.seqlen_k; }

  // Row `row` of head `h` of a (batch, seqlen, heads, head_dim) tensor with strides `s`.
  template <class T>
  __device__ __forceinline__ T* rows(T* base, const FlashStrides& s, int h, int row) const {
    return base + b_ * s.batch + h * s.head + row * s.row;
  }
  __device__ __forceinline__ const u16* q(int h, int row) const { return rows(static_cast<const u16*>(p_.q), p_.q_stride, h, row); }
  __device__ __forceinline__ const u16* k(int h_kv, int row) const { return rows(static_cast<const u16*>(p_.k), p_.k_stride, h_kv, row); }
  __device__ __forceinline__ const u16* v(int h_kv, int row) const { return rows(static_cast<const u16*>(p_.v), p_.v_stride, h_kv, row); }
  __device__ __forceinline__ u16* o(int h, int row) const { return rows(static_cast<u16*>(p_.o), p_.o_stride, h, row); }
  __device__ __forceinline__ const u16* dout(int h, int row) const {
    return rows(static_cast<const u16*>(p_.dout), p_.dout_stride, h, row);
  }
  __device__ __forceinline__ u16* dq(int h, int row) const { return rows(static_cast<u16*>(p_.dq), p_.dq_stride, h, row); }
  __device__ __forceinline__ u16* dk(int h_kv, int row) const { return rows(static_cast<u16*>(p_.dk), p_.dk_stride, h_kv, row); }
  __device__ __forceinline__ u16* dv(int h_kv, int row) const { return rows(static_cast<u16*>(p_.dv), p_.dv_stride, h_kv, row); }

  // Index of query row 0 of head h in lse (batch, heads_q, seqlen_q).
  __device__ __forceinline__ i64 lse_row(int h) const { return (static_cast<i64>(b_) * p_.heads_q + h) * p_.seqlen_q; }
  // Index of query row 0 of head h in D and the dQ accumulator's rows (batch, heads_q, seqlen_q_rounded).
  __device__ __forceinline__ i64 accum_row(int h) const {
    return (static_cast<i64>(b_) * p_.heads_q + h) * p_.seqlen_q_rounded;
  }

 protected:
  const FlashAttentionParams& p_;
  int b_;
};

}  // namespace flash
