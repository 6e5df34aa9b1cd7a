// flashgen C++ API: exact attention (FlashAttention forward and backward)
// through kernels generated and compiled at run time, or the CPU backend.
//
// Layout contract (DESIGN.md): q (batch, seqlen_q, heads_q, head_dim),
// k/v (batch, seqlen_k, heads_kv, head_dim), o like q, any strides with a
// contiguous last dimension; lse fp32 (batch, heads_q, seqlen_q), natural log.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "flashgen/types.hpp"  // Status, Error, DType, version()

namespace flashgen {

// Where a tensor's memory lives: the CPU (device == kCpu) or a CUDA device ordinal.
constexpr int kCpu = -1;

// A non-owning view of a rank-≤4 tensor. Strides are in elements.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int device = kCpu;
  int rank = 4;
  std::array<std::int64_t, 4> shape{};
  std::array<std::int64_t, 4> stride{};

  // A contiguous (row-major) view.
  static Tensor contiguous(void* data, DType dtype, std::array<std::int64_t, 4> shape, int device = kCpu);
  static Tensor contiguous3(void* data, DType dtype, std::array<std::int64_t, 3> shape, int device = kCpu);
  std::int64_t numel() const;
};

// Options every attention call shares.
struct AttentionOptions {
  // NaN means the default 1/sqrt(head_dim).
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();
  bool causal = false;
  // Sliding window: query i sees keys j with i + sk - sq - left <= j <= i + sk - sq + right.
  // -1 means unbounded on that side.
  int window_left = -1;
  int window_right = -1;
  // Soft-capping of the logits: softcap * tanh(s / softcap); 0 disables it.
  float softcap = 0.0f;
  // Bitwise-reproducible gradients (no atomics in the reduction order).
  bool deterministic = false;
};

// Packed variable-length batches (FlashAttention's varlen), optional: cu_seqlens_q.data null
// means a dense batch. With it the batch is packed along one token dimension, every tensor
// one rank lower: q, o, dout, dq (total_q, heads_q, head_dim); k, v, dk, dv (total_k,
// heads_kv, head_dim); lse fp32 (heads_q, total_q), contiguous. cu_seqlens_q and cu_seqlens_k
// are int32 (batch + 1,) on q's device: sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b +
// 1]) of q and [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v, non-decreasing from >= 0 to
// at most the total; max_seqlen_q and max_seqlen_k (>= 1) bound the lengths and size the GPU
// grid. Every option applies per sequence (causal and window masks bottom-right aligned to its
// own lengths); a sequence without keys gets o = 0 and lse = -inf, one without queries
// nothing. The CPU backend reads cu_seqlens and rejects violations (invalid_argument); the GPU
// kernels read them on the device (CUDA-graph safe) and clamp instead: rows past max_seqlen or
// outside the tensors are neither read nor written.
struct PackedSequences {
  Tensor cu_seqlens_q = {}, cu_seqlens_k = {};
  std::int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  bool packed() const { return cu_seqlens_q.data != nullptr; }
};

// Outputs (o, lse; dq, dk, dv) must not share memory with any input or with each other, and
// every output element needs an address of its own (no zero or interleaving strides);
// views of one buffer that interleave without sharing elements (packed q/k/v, dq/dk/dv)
// are fine. Inputs may overlap each other and use zero strides (broadcast). Violations are
// Status::invalid_argument naming the tensors.
struct ForwardArgs {
  Tensor q, k, v;  // inputs
  Tensor o;        // output, like q
  Tensor lse;      // output, fp32 (batch, heads_q, seqlen_q); data may be null if not wanted
  AttentionOptions options;

  // KV cache (optional; data null: absent). Forward only, any seqlen_q.
  // block_table: a paged cache. k and v are then pages (num_pages, page_size, heads_kv,
  // head_dim), any page_size >= 1, and block_table int32 (batch, max_pages_per_seq), last
  // dimension contiguous, lists each sequence's pages: key j of sequence b is row
  // j % page_size of page block_table[b][j / page_size]. seqlen_k is max_pages_per_seq *
  // page_size. Entries past a sequence's keys are never read; on the GPU an entry outside
  // [0, num_pages) reads page 0 or num_pages - 1 instead of memory it does not own.
  Tensor block_table = {};  // (= {}: aggregate initialisations that stop before it need not name it)
  // seqused_k: int32 (batch,): sequence b attends to its first seqused_k[b] keys (clamped to
  // [0, seqlen_k] on the GPU; outside it is invalid_argument on the CPU), and causal and
  // window masks align to that count (bottom-right). A sequence with no key gets o = 0 and
  // lse = -inf. Read on the device by the kernels: the call stays CUDA-graph safe.
  Tensor seqused_k = {};
  // Packed variable-length sequences (see PackedSequences). With a KV cache (block_table or
  // seqused_k) only the queries are packed: q, o (total_q, heads_q, head_dim), lse (heads_q,
  // total_q), cu_seqlens_q and max_seqlen_q as there; cu_seqlens_k is null and max_seqlen_k 0,
  // and the keys of sequence b are those of the cache's row b (k, v (batch, seqlen_k, heads_kv,
  // head_dim)) or of block_table row b (pages), seqused_k[b] of them (all without seqused_k):
  // a batch of prefill chunks and decode steps over their caches in one call.
  PackedSequences varlen = {};
  // Split-KV decode (a call of seqlen_q <= 16, or over a KV cache): how many CTAs share each
  // tile's keys, their partial results merged by an lse-combine kernel. 0 picks the count from
  // the GPU's SMs and the lengths; 1 runs unsplit; n in 2..kMaxNumSplits splits the keys into
  // ceil(tiles / ceil(tiles / n)) parts of whole key tiles (at most n). Other calls take only
  // 0 or 1. The CPU backend computes the one exact result whatever the count.
  int num_splits = 0;
};

// The most key splits a split-KV decode launch takes (ForwardArgs::num_splits).
constexpr int kMaxNumSplits = 128;

// Rotary position embedding (RoPE), FlashAttention's convention: cos and sin are (positions,
// rotary_dim / 2) in the dtype of the rows they rotate, last dimension contiguous; rotary_dim
// is a multiple of 16 and at most head_dim. The first rotary_dim columns of a row at position
// t are rotated by the angles of row t: the pairs of columns (2j, 2j + 1) when interleaved
// (GPT-J), else (j, j + rotary_dim / 2) (GPT-NeoX), each x' = x cos - y sin, y' = x sin + y cos
// in fp32; the other columns are copied.
struct Rotary {
  Tensor cos = {}, sin = {};
  bool interleaved = false;
  bool active() const { return cos.data != nullptr || sin.data != nullptr; }
};

// New keys and values appended to a KV cache (Runtime::append_kv): what FlashAttention's
// flash_attn_with_kvcache does with its k and v before the attention, as its own launch. Row i
// of sequence b of k and v goes to position cache_seqlens[b] + i of the caches, which are
// dense (batch, capacity, heads_kv, head_dim) or, with block_table, pages as ForwardArgs takes
// them (any page size). The forward over the cache that follows sees the new keys with
// seqused_k[b] = cache_seqlens[b] + seqlen_new. On the GPU the positions are read on the
// device (a captured CUDA graph replays with new lengths) and rows whose position falls
// outside the cache, or on a block-table entry outside [0, num_pages), are not written; on
// the CPU such positions are invalid_argument.
struct KvAppendArgs {
  Tensor k, v;              // the new rows (batch, seqlen_new, heads_kv, head_dim)
  Tensor k_cache, v_cache;  // written in place
  Tensor block_table = {};  // int32 (batch, max_pages_per_seq): a paged cache
  Tensor cache_seqlens;     // int32 (batch,): where each sequence's new rows start
  // Optional: the new keys rotated at their positions (rotary.cos needs a row for every
  // position of the cache: capacity rows or more).
  Rotary rotary = {};
  // Optional with rotary: q (batch, seqlen_q, heads_q, head_dim) rotated into q_rotated (like q;
  // it may be q itself: rotated in place) at positions cache_seqlens[b] + i, or, with
  // q_at_consecutive_positions false, every row at cache_seqlens[b] (FlashAttention does the
  // first under a causal or local mask, the second otherwise). A position past the cos table
  // gives NaN rows on the GPU and invalid_argument on the CPU.
  Tensor q = {}, q_rotated = {};
  bool q_at_consecutive_positions = true;
  // Optional: packed new rows, FlashAttention's varlen layout (a prefill's prompts in one
  // launch): k and v are (total, heads_kv, head_dim) and sequence b's new rows are
  // [cu_seqlens[b], cu_seqlens[b + 1]) of them (int32 (batch + 1,), non-decreasing from >= 0 to
  // at most total; the CPU backend checks it, the GPU reads it on the device and writes no row
  // outside every sequence); q, when rotated, is packed with the same offsets (total,
  // heads_q, head_dim), like q_rotated.
  Tensor cu_seqlens = {};
};

// Logit range. The backward, like FlashAttention's, recomputes P = exp(s - lse) from the
// forward's fp32 lse (row max plus log row sum), so every recomputed P carries a relative
// error of about |lse| * 2^-24. That stays below the inputs' own precision while |lse| <=
// 2^13 for fp16 and 2^16 for bf16 (logits softmax_scale * q.k of that size): the supported
// range. Beyond it gradients degrade gradually (at |lse| ~ 3e10, from fp16 inputs of 65504,
// log(row sum) is below lse's ulp and P loses its normalisation); forward outputs and lse
// stay exact to fp32 at any finite logit.
struct BackwardArgs {
  Tensor q, k, v, o, lse, dout;  // inputs (lse is required)
  Tensor dq, dk, dv;             // outputs, shapes like q, k, v, dtypes like the inputs
  AttentionOptions options;
  // Optional caller-provided device workspace (see Runtime::backward_workspace_bytes);
  // when null the runtime allocates stream-ordered memory on the caller's stream.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Packed variable-length sequences, as the forward had them (see PackedSequences).
  PackedSequences varlen = {};
};

enum class LogLevel : int { debug = 0, info = 1, warning = 2, error = 3 };
using LogSink = std::function<void(LogLevel, const std::string&)>;

// Which tile sizes the GPU kernels use. Winners are persisted in <cache_dir>/autotune.json,
// per GPU (name, SM count), driver, NVRTC and flashgen version, and per candidate set.
//   off:     the heuristic table only (compiler/kernel_selection.cpp)
//   cached:  persisted winners, else the heuristic table; never tunes (the default)
//   startup: like cached, and Runtime's constructor tunes the declared tune_shapes that
//            have no winner yet
//   full:    like startup, but retunes every declared shape
// The environment variable FLASHGEN_AUTOTUNE=off|cached|startup|full, when set, overrides
// RuntimeOptions::autotune (like every FLASHGEN_ variable, the operator's setting wins).
enum class AutotunePolicy : int { off = 0, cached = 1, startup = 2, full = 3 };

// A problem an engine declares for autotuning. Tuning is per sequence-length bucket (the
// power of 4 nearest to max(seqlen_q, seqlen_k), from 256), so a shape stands for every
// problem of its bucket with the same head_dim, dtype and options; batch and heads do not matter.
struct TuneShape {
  int head_dim = 128;
  DType dtype = DType::bf16;
  std::int64_t seqlen_q = 4096;
  std::int64_t seqlen_k = 4096;
  AttentionOptions options;  // causal, window, softcap and deterministic select the kernels
  bool forward = true;       // tune the forward pass
  bool backward = true;      // tune the backward pass (timed as a whole: preprocess, dK/dV, dQ)
  int device = 0;            // CUDA device ordinal
};

// One tuned (pass, shape bucket): what won and by how much.
struct TuneOutcome {
  std::string key;        // e.g. "fwd_d128_bf16_causal_n4096_sm_90a"
  std::string winner;     // kernel URIs joined by '+'
  std::string heuristic;  // the heuristic table's kernels
  double winner_ms = 0;     // median time of the winner (infinity: every candidate failed)
  double heuristic_ms = 0;  // median time of the heuristic default (infinity: it failed)
  int candidates = 0;       // candidates in the set
  int failed = 0;           // candidates that did not compile or run
  bool cached = false;      // the winner was already persisted; nothing was timed
};

struct RuntimeOptions {
  std::string cache_dir;  // empty: $FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen or ~/.cache/flashgen
  AutotunePolicy autotune = AutotunePolicy::cached;
  LogSink log;            // empty: warnings and errors go to stderr
  int cpu_threads = 0;    // CPU backend threads; 0 = hardware concurrency
  // The kernel set a package ships, searched before compiling and loaded without NVRTC (the
  // Python package passes its wheel's flashgen/kernels; docs/cache.md, "Kernels shipped with
  // the package"). Empty: $FLASHGEN_PACKAGED_KERNELS, else none.
  std::string packaged_kernels;
  // While a variant's own kernels compile, run its dense calls on the kernels of the next
  // head-dim class (64, 128, 256: those the package ships) over zero-padded copies of its
  // tensors instead of waiting (runtime/padded_substitute.h): exact, and the compile goes on
  // beside it. Not for deterministic gradients, packed sequences, KV caches or graph capture.
  // The first call then rounds as the class's kernels do (within the FA error rule of the
  // variant's own). A process that exits meanwhile waits for the compile (runtime/exit_drain.h).
  // $FLASHGEN_SUBSTITUTE_KERNELS, when set, overrides.
  bool substitute_while_compiling = true;
  // Shapes tuned at construction under the startup (what is missing) and full (all) policies.
  std::vector<TuneShape> tune_shapes;
};

// The passes whose kernels Runtime::prepare compiles (a bit set).
enum class Passes : unsigned { forward = 1, backward = 2, both = 3 };

// The entry point. Thread-safe: one Runtime may serve many threads and streams.
// Buffers on the CPU run through the CPU backend; buffers on a CUDA device run
// through generated kernels, asynchronously on `stream` (a CUstream, may be null).
class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void forward(const ForwardArgs& args, void* stream = nullptr);
  void backward(const BackwardArgs& args, void* stream = nullptr);
  // Writes the new keys and values into the cache (and rotates them and q): see KvAppendArgs.
  // Asynchronous on `stream` like forward, and as CUDA-graph safe.
  void append_kv(const KvAppendArgs& args, void* stream = nullptr);

  // Starts compiling, on the runtime's compile threads, the GPU kernels that forward(args)
  // and/or the backward of the same problem launch, and returns at once (no stream work, no
  // synchronisation): those calls then find the kernels ready or wait only for the rest of
  // their compiles, while calls whose kernels are loaded run meanwhile. A training step
  // calls it before the first forward of a variant (PyTorch does for inputs that require
  // grad) so that its backward does not stall on compiles. args is validated as forward()
  // validates it; on CPU tensors there is nothing to compile. Compile errors are reported by
  // the forward or backward that needs the kernel.
  void prepare(const ForwardArgs& args, Passes passes = Passes::both);

  // Bytes of device workspace backward needs for this problem.
  std::size_t backward_workspace_bytes(const BackwardArgs& args) const;

  // Tunes the shapes now on their devices (compiling the candidates in parallel, timing
  // each on random data) and persists the winners; `retune` false keeps winners that are
  // already persisted. Later calls of this and other runtimes (policy cached and up) use
  // them. Blocks the calling thread and synchronises the device. Throws Error(no_device)
  // without a GPU.
  std::vector<TuneOutcome> tune(const std::vector<TuneShape>& shapes, bool retune = false);

  const RuntimeOptions& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashgen
