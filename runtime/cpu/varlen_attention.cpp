// The CPU backend on packed variable-length sequences (PackedSequences): each sequence's rows
// of the packed tensors are viewed in place as a dense batch of one and run through the dense
// forward or backward, so that the packed layout's reference is the dense one and shares none
// of the GPU's offset arithmetic. No copies: only the views' pointers and shapes change.
#include <cstddef>
#include <cstdint>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/packed_rows.h"
#include "runtime/cpu/tensor_io.h"

namespace flashgen::cpu {
namespace {

// Sequence b: its rows of q and of k.
struct Sequence {
  PackedRange q, k;
};
Sequence sequence(const PackedSequences& s, std::int64_t b) {
  return {packed_range(s.cu_seqlens_q, b), packed_range(s.cu_seqlens_k, b)};
}

// The dense problem of one sequence: the packed one's heads, dtype and resolved options.
Problem dense_problem(const Problem& p, const Sequence& s) {
  Problem one = p;
  one.batch = 1;
  one.seqlen_q = s.q.rows;
  one.seqlen_k = s.k.rows;
  one.varlen = false;
  one.total_q = one.total_k = 0;
  return one;
}

}  // namespace

void varlen_forward(const ForwardArgs& args, const Problem& p, int threads, Algorithm algorithm) {
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Sequence s = sequence(args.varlen, b);
    if (s.q.rows == 0) continue;
    ForwardArgs one;
    one.q = rows_view(args.q, s.q);
    one.o = rows_view(args.o, s.q);
    one.lse = lse_view(args.lse, s.q);
    one.options = args.options;
    const Problem dense = dense_problem(p, s);
    if (s.k.rows == 0) {
      store_without_keys(one, dense, 0);
      continue;
    }
    one.k = rows_view(args.k, s.k);
    one.v = rows_view(args.v, s.k);
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
    one.q = rows_view(args.q, s.q);
    one.o = rows_view(args.o, s.q);
    one.dout = rows_view(args.dout, s.q);
    one.dq = rows_view(args.dq, s.q);
    one.lse = lse_view(args.lse, s.q);
    one.k = rows_view(args.k, s.k);
    one.v = rows_view(args.v, s.k);
    one.dk = rows_view(args.dk, s.k);
    one.dv = rows_view(args.dv, s.k);
    one.options = args.options;
    // Keys no query sees and queries that see no key have zero gradients.
    if (s.q.rows == 0 || s.k.rows == 0) {
      store_zero_rows(one.dq, 0, s.q.rows, p.heads_q, p.head_dim);
      store_zero_rows(one.dk, 0, s.k.rows, p.heads_kv, p.head_dim);
      store_zero_rows(one.dv, 0, s.k.rows, p.heads_kv, p.head_dim);
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
