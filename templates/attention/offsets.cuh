// Where a (batch, head) slice of each tensor starts and which sequence lengths it has:
// the one place that turns the parameter block's strides into addresses. Dense batches
// (DenseOffsets) and packed variable-length sequences (VarlenOffsets, cu_seqlens) here, with
// one interface that the kernels take as SeqOffsets<Cfg::kVarlen>; a KV cache's key counts
// and pages are KvCacheOffsets (kv_cache/kv_cache_offsets.cuh).
#pragma once

#include "arch/types.cuh"
#include "params/attention_params.h"

namespace flash {

// The tensors of the parameter block by side, stated once: q, o, dout and dq are q-like (rows
// are query positions), k, v, dk and dv k-like (key positions). Rows supplies where a row of
// each side is: q_rows(base, strides, head, row) and k_rows(...), and holds p_.
template <class Rows>
class TensorRows : public Rows {
 public:
  using Rows::Rows;
  __device__ __forceinline__ const u16* q(int h, int row) const { return qs(this->p_.q, this->p_.q_stride, h, row); }
  __device__ __forceinline__ const u16* k(int h_kv, int row) const { return ks(this->p_.k, this->p_.k_stride, h_kv, row); }
  __device__ __forceinline__ const u16* v(int h_kv, int row) const { return ks(this->p_.v, this->p_.v_stride, h_kv, row); }
  __device__ __forceinline__ u16* o(int h, int row) const { return qs(this->p_.o, this->p_.o_stride, h, row); }
  __device__ __forceinline__ const u16* dout(int h, int row) const {
    return qs(this->p_.dout, this->p_.dout_stride, h, row);
  }
  __device__ __forceinline__ u16* dq(int h, int row) const { return qs(this->p_.dq, this->p_.dq_stride, h, row); }
  __device__ __forceinline__ u16* dk(int h_kv, int row) const { return ks(this->p_.dk, this->p_.dk_stride, h_kv, row); }
  __device__ __forceinline__ u16* dv(int h_kv, int row) const { return ks(this->p_.dv, this->p_.dv_stride, h_kv, row); }

 private:
  // The parameter block's untyped pointers as 16-bit elements, constness kept.
  __device__ __forceinline__ const u16* qs(const void* base, const FlashStrides& s, int h, int row) const {
    return this->q_rows(static_cast<const u16*>(base), s, h, row);
  }
  __device__ __forceinline__ u16* qs(void* base, const FlashStrides& s, int h, int row) const {
    return this->q_rows(static_cast<u16*>(base), s, h, row);
  }
  __device__ __forceinline__ const u16* ks(const void* base, const FlashStrides& s, int h, int row) const {
    return this->k_rows(static_cast<const u16*>(base), s, h, row);
  }
  __device__ __forceinline__ u16* ks(void* base, const FlashStrides& s, int h, int row) const {
    return this->k_rows(static_cast<u16*>(base), s, h, row);
  }
};

// Sequence b of packed rows: start = cu[b] in [0, total], length = cu[b + 1] - start in
// [0, min(max_len, total - start)], so that a bad offset reads and writes nothing outside.
__device__ __forceinline__ void packed_range(const int* cu, int b, int total, int max_len, int& start, int& len) {
  start = min(max(cu[b], 0), total);
  len = min(max(cu[b + 1] - start, 0), min(max_len, total - start));
}

// A row of the dQ accumulator as its TMA map's coordinates (accum_tma_coords).
struct AccumCoords {
  int row, plane;
};

// Every value is read from the parameter block where it is used (kernel parameters are
// constant-bank operands on the GPU), so that nothing here holds registers across a mainloop.
class DenseRows {
 public:
  __device__ __forceinline__ DenseRows(const FlashAttentionParams& p, int batch) : p_(p), b_(batch) {}

  __device__ __forceinline__ int seqlen_q() const { return p_.seqlen_q; }
  __device__ __forceinline__ int seqlen_k() const { return p_.seqlen_k; }

  // Row `row` of head `h` of a (batch, seqlen, heads, head_dim) tensor with strides `s`.
  template <class T>
  __device__ __forceinline__ T* rows(T* base, const FlashStrides& s, int h, int row) const {
    return base + b_ * s.batch + h * s.head + row * s.row;
  }
  template <class T>
  __device__ __forceinline__ T* q_rows(T* base, const FlashStrides& s, int h, int row) const {
    return rows(base, s, h, row);
  }
  template <class T>
  __device__ __forceinline__ T* k_rows(T* base, const FlashStrides& s, int h, int row) const {
    return rows(base, s, h, row);
  }

  // Index of query row 0 of head h in lse (batch, heads_q, seqlen_q), and lse's rows.
  __device__ __forceinline__ i64 lse_row(int h) const { return (static_cast<i64>(b_) * p_.heads_q + h) * p_.seqlen_q; }
  static __device__ __forceinline__ i64 lse_rows(const FlashAttentionParams& p) {
    return static_cast<i64>(p.batch) * p.heads_q * p.seqlen_q;
  }
  // Index of query row 0 of head h in D and the dQ accumulator's rows (batch, heads_q, seqlen_q_rounded).
  __device__ __forceinline__ i64 accum_row(int h) const {
    return (static_cast<i64>(b_) * p_.heads_q + h) * p_.seqlen_q_rounded;
  }
  // The accumulator map's (row, plane) of query row m0 of head h: a plane per (batch, head)
  // (runtime/tensor_maps.cpp), so that the map clips a tile's rows at the plane's end (an
  // 80-row tile's last rows past seqlen_q rounded to 128 would be the next head's).
  __device__ __forceinline__ AccumCoords accum_tma_coords(int h, int m0) const { return {m0, b_ * p_.heads_q + h}; }

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
class VarlenRows {
 public:
  __device__ __forceinline__ VarlenRows(const FlashAttentionParams& p, int batch) : p_(p), b_(batch) {
    packed_range(p.cu_seqlens_q, batch, p.total_q, p.seqlen_q, start_q_, seqlen_q_);
    packed_range(p.cu_seqlens_k, batch, p.total_k, p.seqlen_k, start_k_, seqlen_k_);
  }

  __device__ __forceinline__ int seqlen_q() const { return seqlen_q_; }
  __device__ __forceinline__ int seqlen_k() const { return seqlen_k_; }

  // Row `row` of head `h` of sequence b in a packed (total, heads, head_dim) tensor.
  template <class T>
  __device__ __forceinline__ T* q_rows(T* base, const FlashStrides& s, int h, int row) const {
    return at(base, s, h, start_q_ + row);
  }
  template <class T>
  __device__ __forceinline__ T* k_rows(T* base, const FlashStrides& s, int h, int row) const {
    return at(base, s, h, start_k_ + row);
  }

  // lse is (heads_q, total_q).
  __device__ __forceinline__ i64 lse_row(int h) const { return static_cast<i64>(h) * p_.total_q + start_q_; }
  // D and the dQ accumulator: total_q + kFlashDqRowRounding * batch rows per head.
  __device__ __forceinline__ i64 accum_row(int h) const {
    return static_cast<i64>(h) * (p_.total_q + static_cast<i64>(kFlashDqRowRounding) * p_.batch) + start_q_ +
           static_cast<i64>(kFlashDqRowRounding) * b_;
  }
  // The accumulator map's (row, plane) (DenseRows): one plane, since a tile's rows past its
  // sequence stay in the sequence's kFlashDqRowRounding spare rows (a tile has at most 128).
  __device__ __forceinline__ AccumCoords accum_tma_coords(int h, int m0) const {
    return {static_cast<int>(accum_row(h) + m0), 0};
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

 protected:
  const FlashAttentionParams& p_;

 private:
  template <class T>
  __device__ __forceinline__ static T* at(T* base, const FlashStrides& s, int h, int row) {
    return base + h * s.head + static_cast<i64>(row) * s.row;
  }

  int b_;
  int start_q_, seqlen_q_, start_k_, seqlen_k_;
};

using DenseOffsets = TensorRows<DenseRows>;
using VarlenOffsets = TensorRows<VarlenRows>;

template <bool kVarlen>
using SeqOffsets = typename Select<kVarlen, VarlenOffsets, DenseOffsets>::type;

}  // namespace flash
