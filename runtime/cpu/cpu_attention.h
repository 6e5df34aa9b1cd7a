// The CPU backend: the seed's algorithm in C++. `standard` materialises S and P
// in fp64 (the oracle every test compares with); `tiled` is the FlashAttention
// forward with the m/l ledger and the backward that recomputes P from lse.
#pragma once

#include <span>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/validate.h"

namespace flashgen::cpu {

// Tile sizes of the tiled backend (rows of Q, rows of K/V per tile).
struct TileConfig {
  int block_m = 64;
  int block_n = 64;
};

// All functions take validated arguments (validate_forward/backward) and the Problem
// they returned; `threads` = 0 means hardware concurrency. Inputs and outputs may be
// f32, f16 or bf16 (each tensor in its own dtype); lse is fp32. Results do not depend
// on `threads`: every output element is written by exactly one task.
void tiled_forward(const ForwardArgs& args, const Problem& p, int threads, TileConfig tiles = {});
// A forward over a KV cache (p.kv_cache(): block_table and/or seqused_k): per sequence, its
// keys gathered from the pages into a dense copy, then tiled_forward. Invalid block-table
// entries or key counts (readable here) are invalid_argument.
void kv_cache_forward(const ForwardArgs& args, const Problem& p, int threads);
void tiled_backward(const BackwardArgs& args, const Problem& p, int threads, TileConfig tiles = {});

// Packed variable-length sequences (p.varlen, PackedSequences): sequence b's rows (cu_seqlens,
// checked by validate_*) viewed as a dense batch of one of lengths (len_q, len_k) and run
// through the dense backend `algorithm` names (standard: the oracle in the packed layout), so
// that every option applies per sequence. A sequence without queries writes nothing but, in
// the backward, dk = dv = 0 for its keys; one without keys gets o = 0, lse = -inf and dq = 0.
// Rows outside every sequence are neither read nor written.
enum class Algorithm { tiled, standard };

// The KV append (validate_kv_append checked every position): new rows copied into the
// cache, keys and q rotated in double and rounded once.
void kv_append(const KvAppendArgs& args, const KvAppendProblem& problem, int threads);
void varlen_forward(const ForwardArgs& args, const Problem& p, int threads, Algorithm algorithm = Algorithm::tiled);
void varlen_backward(const BackwardArgs& args, const Problem& p, int threads, Algorithm algorithm = Algorithm::tiled);

// The oracle: S and P of each head materialised and computed in fp64 from the inputs
// alone (backward ignores args.o and args.lse and recomputes everything), then rounded
// to the outputs' dtypes.
void standard_forward(const ForwardArgs& args, const Problem& p, int threads = 1);
void standard_backward(const BackwardArgs& args, const Problem& p, int threads = 1);

// The oracle in fp64 end to end, on contiguous tensors in the contract's layout
// (q, o, dout, dq: batch, seqlen_q, heads_q, head_dim; k, v, dk, dv: batch, seqlen_k,
// heads_kv, head_dim; lse: batch, heads_q, seqlen_q). Tests differentiate it numerically.
struct Fp64Outputs {
  std::vector<double> o, lse;
};
struct Fp64Gradients {
  std::vector<double> dq, dk, dv;
};
Fp64Outputs standard_forward_f64(const Problem& p, std::span<const double> q, std::span<const double> k,
                                 std::span<const double> v, int threads = 1);
Fp64Gradients standard_backward_f64(const Problem& p, std::span<const double> q, std::span<const double> k,
                                    std::span<const double> v, std::span<const double> dout, int threads = 1);

}  // namespace flashgen::cpu
