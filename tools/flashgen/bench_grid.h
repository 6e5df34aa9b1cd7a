// `flashgen bench`: what to measure. The flags as given, the shape grid they expand to
// (default: the grid of shared/anchors/h200-peers.md), and the FLOP counts that turn
// times into TFLOP/s (the same formulas as bench/compare_sdpa.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

// The flags of `flashgen bench`, as parsed by CLI11. Zero means "derive the default".
struct BenchOptions {
  std::vector<int> head_dims = {64, 128};
  std::vector<std::string> seqlens = {"512", "1k", "2k", "4k", "8k", "16k"};
  std::int64_t batch = 0;     // 0: 16384 / N (total tokens 16384)
  std::int64_t heads = 0;     // 0: 2048 / D (model width 2048)
  std::int64_t heads_kv = 0;  // 0: like heads
  std::string causal = "both";
  std::string dtype = "bf16";
  std::vector<int> window;  // empty or {left, right}; -1: unbounded side
  float softcap = 0.0f;
  bool deterministic = false;
  std::vector<std::string> layouts = {"dense"};  // dense, varlen
  // Decode rows instead of the grid: issue 15's shapes (kDecodeRows) over a KV cache, forward
  // only, each at every page size (0: a contiguous cache with per-sequence key counts).
  bool decode = false;
  std::vector<int> page_sizes = {0, 16, 256};
  std::vector<std::string> passes = {"fwd", "bwd", "fwdbwd"};
  int warmup = 2;
  int repeats = 7;
  std::string json_path;
  std::string csv_path;
};

constexpr std::int64_t kTotalTokens = 16384;  // B * N of the default grid
constexpr std::int64_t kModelWidth = 2048;    // H * D of the default grid

enum class BenchPass { forward, backward, forward_backward };
const char* to_string(BenchPass pass);  // "fwd", "bwd", "fwdbwd"

// One problem: self-attention, seqlen_q = seqlen_k = seqlen.
struct BenchShape {
  std::int64_t batch = 0, seqlen = 0, heads = 0, heads_kv = 0;
  int head_dim = 0;
  AttentionOptions options;
  // The batch as packed sequences of seqlen tokens each (PackedSequences): the same memory,
  // FLOPs and kernels' tiles as the dense batch, so the ratio is what varlen addressing costs.
  bool varlen = false;
  // A decode row: seqlen_q queries (1..16) per sequence against a KV cache of `seqlen` keys
  // (per-sequence key counts given, all `seqlen`), paged when page_size > 0. 0: not a decode row.
  std::int64_t seqlen_q = 0;
  int page_size = 0;
  bool decode() const { return seqlen_q > 0; }
};

// Issue 15's decode rows (bf16, D = 128, 32 query heads, 8 KV heads): batch, queries, keys.
struct DecodeRow {
  std::int64_t batch, seqlen_q, seqlen_k;
};
constexpr DecodeRow kDecodeRows[] = {{64, 1, 8192}, {8, 1, 65536}, {1, 1, 262144}, {64, 4, 8192}, {8, 16, 16384}};

// What the flags expand to, validated: every bad flag value is an Error(invalid_argument)
// naming the flag, the value and what was expected, raised before any GPU work.
struct BenchPlan {
  DType dtype = DType::bf16;
  std::vector<BenchShape> shapes;  // order: D, causal (off first), N, layout (dense first)
  std::vector<BenchPass> passes;
};
BenchPlan make_bench_plan(const BenchOptions& options);

// Flag values `flashgen bench`, `tune` and `cache warm` share. "512" -> 512, "4k" / "4K" -> 4096;
// "on" / "off" / "both" -> the settings to run (parse_causal: of --causal). Throw
// Error(invalid_argument) naming the flag.
std::int64_t parse_length(const std::string& text, const char* flag);
std::vector<bool> parse_on_off_both(const std::string& text, const char* flag);
std::vector<bool> parse_causal(const std::string& text);

// The FLOPs of h200-peers.md: forward 4·B·H·N²·D, halved when causal; backward 2.5×,
// forward+backward 3.5× the forward. With a sliding window, N² becomes the number of
// (query, key) pairs the window lets through (causal included in the window).
double forward_flops(const BenchShape& shape);
// Bytes of K and V a forward reads (2 x batch x keys x heads_kv x head_dim x 2): what decode is bound by.
double kv_bytes(const BenchShape& shape);
double pass_flops(const BenchShape& shape, BenchPass pass);

}  // namespace flashgen::cli
