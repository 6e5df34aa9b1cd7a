// Where a (batch, head) slice of each tensor starts and which sequence lengths it has:
// the one place that turns the parameter block's strides into addresses. Dense batches
// (DenseOffsets) and packed variable-length sequences (VarlenOffsets, cu_seqlens) here, with
// one interface that the kernels take as SeqOffsets<Cfg::kVarlen>; a KV cache's key counts
// and pages are KvCacheOffsets (attention/kv_cache_offsets.cuh).
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

  // Whether a CTA's tile starts past its sequence: never in a dense batch (the grid fits it).
  __device__ __forceinline__ bool past_queries(int m0) const { return false; }
  __device__ __forceinline__ bool past_keys(int n0) const { return false; }
  __device__ __forceinline__ bool past_accum_rows(int m0) const { return false; }

  // TMA coordinates (row, batch) of a q-like tensor's row m0 and a k-like tensor's row n0 in
  // the (head_dim, seqlen, heads, batch) descriptors.
  __device__ __forceinline__ int tma_q_row(int m0) const { return m0; }
  __device__ __forceinline__ int tma_k_row(int n0) const { return n0; }
  __device__ __forceinline__ int tma_batch() const { return b_; }
  // TMA stores clip rows only at the tensor's end, which is this sequence's end.
  static constexpr bool tma_store_clips() { return true; }

 protected:
  const FlashAttentionParams& p_;
  int b_;
};

// Packed sequences: sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the q-like
// tensors and [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of the k-like ones (params/attention_params.h),
// clamped so that a bad offset reads and writes nothing outside the tensors and the grid.
// The starts and lengths are loaded once: every bound and address of the CTA derives from them.
class VarlenOffsets {
 public:
  __device__ __forceinline__ VarlenOffsets(const FlashAttentionParams& p, int batch) : p_(p), b_(batch) {
    range(p.cu_seqlens_q, batch, p.total_q, p.seqlen_q, start_q_, seqlen_q_);
    range(p.cu_seqlens_k, batch, p.total_k, p.seqlen_k, start_k_, seqlen_k_);
  }

  __device__ __forceinline__ int seqlen_q() const { return seqlen_q_; }
  __device__ __forceinline__ int seqlen_k() const { return seqlen_k_; }

  __device__ __forceinline__ const u16* q(int h, int row) const { return at(static_cast<const u16*>(p_.q), p_.q_stride, h, start_q_ + row); }
  __device__ __forceinline__ const u16* k(int h_kv, int row) const { return at(static_cast<const u16*>(p_.k), p_.k_stride, h_kv, start_k_ + row); }
  __device__ __forceinline__ const u16* v(int h_kv, int row) const { return at(static_cast<const u16*>(p_.v), p_.v_stride, h_kv, start_k_ + row); }
  __device__ __forceinline__ u16* o(int h, int row) const { return at(static_cast<u16*>(p_.o), p_.o_stride, h, start_q_ + row); }
  __device__ __forceinline__ const u16* dout(int h, int row) const {
    return at(static_cast<const u16*>(p_.dout), p_.dout_stride, h, start_q_ + row);
  }
  __device__ __forceinline__ u16* dq(int h, int row) const { return at(static_cast<u16*>(p_.dq), p_.dq_stride, h, start_q_ + row); }
  __device__ __forceinline__ u16* dk(int h_kv, int row) const { return at(static_cast<u16*>(p_.dk), p_.dk_stride, h_kv, start_k_ + row); }
  __device__ __forceinline__ u16* dv(int h_kv, int row) const { return at(static_cast<u16*>(p_.dv), p_.dv_stride, h_kv, start_k_ + row); }

  // lse is (heads_q, total_q).
  __device__ __forceinline__ i64 lse_row(int h) const { return static_cast<i64>(h) * p_.total_q + start_q_; }
  // D and the dQ accumulator: total_q + kFlashDqRowRounding * batch rows per head.
  __device__ __forceinline__ i64 accum_row(int h) const {
    return static_cast<i64>(h) * (p_.total_q + static_cast<i64>(kFlashDqRowRounding) * p_.batch) + start_q_ +
           static_cast<i64>(kFlashDqRowRounding) * b_;
  }

  __device__ __forceinline__ bool past_queries(int m0) const { return m0 >= seqlen_q_; }
  __device__ __forceinline__ bool past_keys(int n0) const { return n0 >= seqlen_k_; }
  // The sequence's accumulator rows: its queries rounded up to kFlashDqRowRounding.
  __device__ __forceinline__ bool past_accum_rows(int m0) const {
    return m0 >= (seqlen_q_ + kFlashDqRowRounding - 1) / kFlashDqRowRounding * kFlashDqRowRounding;
  }

  // The descriptors span the packed rows as one batch.
  __device__ __forceinline__ int tma_q_row(int m0) const { return start_q_ + m0; }
  __device__ __forceinline__ int tma_k_row(int n0) const { return start_k_ + n0; }
  __device__ __forceinline__ int tma_batch() const { return 0; }
  // A TMA store would write the next sequence's rows: stores go row by row instead.
  static constexpr bool tma_store_clips() { return false; }

 private:
  template <class T>
  __device__ __forceinline__ static T* at(T* base, const FlashStrides& s, int h, int row) {
    return base + h * s.head + static_cast<i64>(row) * s.row;
  }
  // start = cu[b] in [0, total], length = cu[b + 1] - start in [0, min(max_len, total - start)].
  __device__ __forceinline__ static void range(const int* cu, int b, int total, int max_len, int& start, int& len) {
    start = min(max(cu[b], 0), total);
    len = min(max(cu[b + 1] - start, 0), min(max_len, total - start));
  }

  const FlashAttentionParams& p_;
  int b_;
  int start_q_, seqlen_q_, start_k_, seqlen_k_;
};

template <bool kVarlen>
using SeqOffsets = typename Select<kVarlen, VarlenOffsets, DenseOffsets>::type;

}  // namespace flash
