// The CPU backend on packed variable-length sequences (PackedSequences): each sequence's rows
// of the packed tensors are viewed in place as a dense batch of one and run through the dense
// forward or backward, so that the packed layout's reference is the dense one and shares none
// of the GPU's offset arithmetic. No copies: only the views' pointers and shapes change.
#include <cstddef>
#include <cstdint>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/tensor_io.h"

namespace flashgen::cpu {
namespace {

// Sequence b: rows [q_begin, q_begin + len_q) of q and [k_begin, k_begin + len_k) of k.
struct Sequence {
  std::int64_t q_begin, len_q, k_begin, len_k;
};

Sequence sequence(const PackedSequences& s, std::int64_t b) {
  const auto at = [](const Tensor& cu, std::int64_t i) -> std::int64_t {
    return static_cast<const std::int32_t*>(cu.data)[i * cu.stride[0]];
  };
  const std::int64_t q = at(s.cu_seqlens_q, b), k = at(s.cu_seqlens_k, b);
  return {q, at(s.cu_seqlens_q, b + 1) - q, k, at(s.cu_seqlens_k, b + 1) - k};
}

// Rows [begin, begin + rows) of a packed (total, heads, head_dim) tensor as a dense
// (1, rows, heads, head_dim) one; the batch stride of a batch of one is never used.
Tensor rows_view(const Tensor& t, std::int64_t begin, std::int64_t rows) {
  Tensor out = t;
  out.data = static_cast<std::byte*>(t.data) + begin * t.stride[0] * static_cast<std::int64_t>(size_of(t.dtype));
  out.rank = 4;
  out.shape = {1, rows, t.shape[1], t.shape[2]};
  out.stride = {0, t.stride[0], t.stride[1], t.stride[2]};
  return out;
}

// Columns [begin, begin + rows) of the packed lse (heads_q, total_q) as a dense (1, heads_q, rows)
// one; a null lse (not wanted) stays null.
Tensor lse_view(const Tensor& lse, std::int64_t begin, std::int64_t rows) {
  if (lse.data == nullptr) return lse;
  Tensor out = lse;
  out.data = static_cast<float*>(lse.data) + begin * lse.stride[1];
  out.rank = 3;
  out.shape = {1, lse.shape[0], rows, 0};
  out.stride = {0, lse.stride[0], lse.stride[1], 0};
  return out;
}

// The dense problem of one sequence: the packed one's heads, dtype and resolved options.
Problem dense_problem(const Problem& p, const Sequence& s) {
  Problem one = p;
  one.batch = 1;
  one.seqlen_q = s.len_q;
  one.seqlen_k = s.len_k;
  one.varlen = false;
  one.total_q = one.total_k = 0;
  return one;
}

}  // namespace

void varlen_forward(const ForwardArgs& args, const Problem& p, int threads, Algorithm algorithm) {
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Sequence s = sequence(args.varlen, b);
    if (s.len_q == 0) continue;
    ForwardArgs one;
    one.q = rows_view(args.q, s.q_begin, s.len_q);
    one.o = rows_view(args.o, s.q_begin, s.len_q);
    one.lse = lse_view(args.lse, s.q_begin, s.len_q);
    one.options = args.options;
    const Problem dense = dense_problem(p, s);
    if (s.len_k == 0) {
      store_without_keys(one, dense, 0);
      continue;
    }
    one.k = rows_view(args.k, s.k_begin, s.len_k);
    one.v = rows_view(args.v, s.k_begin, s.len_k);
    if (algorithm == Algorithm::standard)
      standard_forward(one, dense, threads);
    else
      tiled_forward(one, dense, threads);
  }
}

void varlen_backward(const BackwardArgs& args, const Problem& p, int threads, Algorithm algorithm) {
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Sequence s = sequence(args.varlen, b);
    BackwardArgs one;
    one.q = rows_view(args.q, s.q_begin, s.len_q);
    one.o = rows_view(args.o, s.q_begin, s.len_q);
    one.dout = rows_view(args.dout, s.q_begin, s.len_q);
    one.dq = rows_view(args.dq, s.q_begin, s.len_q);
    one.lse = lse_view(args.lse, s.q_begin, s.len_q);
    one.k = rows_view(args.k, s.k_begin, s.len_k);
    one.v = rows_view(args.v, s.k_begin, s.len_k);
    one.dk = rows_view(args.dk, s.k_begin, s.len_k);
    one.dv = rows_view(args.dv, s.k_begin, s.len_k);
    one.options = args.options;
    // Keys no query sees and queries that see no key have zero gradients.
    if (s.len_q == 0 || s.len_k == 0) {
      store_zero_rows(one.dq, 0, s.len_q, p.heads_q, p.head_dim);
      store_zero_rows(one.dk, 0, s.len_k, p.heads_kv, p.head_dim);
      store_zero_rows(one.dv, 0, s.len_k, p.heads_kv, p.head_dim);
      continue;
    }
    const Problem dense = dense_problem(p, s);
    if (algorithm == Algorithm::standard)
      standard_backward(one, dense, threads);
    else
      tiled_backward(one, dense, threads);
  }
}

}  // namespace flashgen::cpu
