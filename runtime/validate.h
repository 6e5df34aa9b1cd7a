// Argument validation for every entry point. Runs before any work; throws
// Error(invalid_argument / unsupported) naming the argument, its value and what was expected.
//
// invalid_argument: the arguments are wrong for any backend (null pointers, shape or
// stride mismatches, options out of range). unsupported: the arguments are valid but the
// backend their device selects cannot run them (fp32 or head_dim > 256 on a GPU, GPU
// pointers or strides that do not allow 16-byte vector loads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// The problem's geometry and its options with defaults resolved.
struct Problem {
  std::int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  DType dtype = DType::f32;
  int device = kCpu;
  AttentionOptions options;  // softmax_scale resolved (NaN -> 1/sqrt(head_dim)); causal => window_right = 0
  bool has_lse = true;
  // KV cache (ForwardArgs::block_table, ::seqused_k). Paged: k and v are num_pages pages of
  // page_size rows, seqlen_k = max_pages_per_seq * page_size.
  bool paged = false;
  std::int64_t num_pages = 0, page_size = 0, max_pages_per_seq = 0;
  bool has_seqused_k = false;
  bool kv_cache() const { return paged || has_seqused_k; }
  // Packed variable-length sequences (PackedSequences): batch is the number of sequences,
  // seqlen_q and seqlen_k are max_seqlen_q and max_seqlen_k, total_q and total_k the packed rows.
  bool varlen = false;
  std::int64_t total_q = 0, total_k = 0;
  int num_splits = 0;  // ForwardArgs::num_splits: 0 automatic (split_count decides)
};

// head_dim ranges each backend supports.
constexpr std::int64_t kGpuMinHeadDim = 1, kGpuMaxHeadDim = 256;
constexpr std::int64_t kCpuMaxHeadDim = 1024;
// GPU kernels load 16 bytes at a time (8 fp16/bf16 elements).
constexpr std::size_t kGpuAlignmentBytes = 16;

Problem validate_forward(const ForwardArgs& args);
Problem validate_backward(const BackwardArgs& args);

// A KV append (KvAppendArgs) as the backends see it.
struct KvAppendProblem {
  // batch, seqlen_k (the cache's capacity: positions per sequence), heads_kv, head_dim, dtype,
  // device and the paged geometry; heads_q and seqlen_q of q where it is rotated, else 0.
  Problem cache;
  std::int64_t seqlen_new = 0;  // new rows per sequence; packed: the rows of k (total)
  bool packed = false;          // KvAppendArgs::cu_seqlens
  std::int64_t rotary_dim = 0;  // 0: no rotary
  std::int64_t rotary_rows = 0;  // positions the cos/sin tables hold
  bool rotate_q = false;
  bool q_in_place = false;  // q_rotated is q
  // Rows of k (and of v) and of q: packed, seqlen_new and seqlen_q already count every row.
  std::int64_t new_rows() const { return packed ? seqlen_new : cache.batch * seqlen_new; }
  std::int64_t query_rows() const { return packed ? cache.seqlen_q : cache.batch * cache.seqlen_q; }
};
KvAppendProblem validate_kv_append(const KvAppendArgs& args);

}  // namespace flashgen
