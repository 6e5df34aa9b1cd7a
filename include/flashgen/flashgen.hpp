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
#include <stdexcept>
#include <string>

namespace flashgen {

// Status codes; the numeric values are the C ABI's (flashgen.h).
enum class Status : int {
  ok = 0,
  invalid_argument = 1,
  unsupported = 2,
  compile_error = 3,
  cuda_error = 4,
  out_of_memory = 5,
  no_device = 6,
  internal = 7,
};
const char* to_string(Status s);

// Every failure inside flashgen is an Error carrying a status and a message that
// names the argument, the value and what was expected.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };
const char* to_string(DType t);
std::size_t size_of(DType t);

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

struct ForwardArgs {
  Tensor q, k, v;  // inputs
  Tensor o;        // output, like q
  Tensor lse;      // output, fp32 (batch, heads_q, seqlen_q); data may be null if not wanted
  AttentionOptions options;
};

struct BackwardArgs {
  Tensor q, k, v, o, lse, dout;  // inputs (lse is required)
  Tensor dq, dk, dv;             // outputs, shapes like q, k, v, dtypes like the inputs
  AttentionOptions options;
  // Optional caller-provided device workspace (see Runtime::backward_workspace_bytes);
  // when null the runtime allocates stream-ordered memory on the caller's stream.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

enum class LogLevel : int { debug = 0, info = 1, warning = 2, error = 3 };
using LogSink = std::function<void(LogLevel, const std::string&)>;

enum class AutotunePolicy : int { off = 0, cached = 1, startup = 2, full = 3 };

struct RuntimeOptions {
  std::string cache_dir;  // empty: $FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen or ~/.cache/flashgen
  AutotunePolicy autotune = AutotunePolicy::cached;
  LogSink log;            // empty: warnings and errors go to stderr
  int cpu_threads = 0;    // CPU backend threads; 0 = hardware concurrency
};

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

  // Bytes of device workspace backward needs for this problem.
  std::size_t backward_workspace_bytes(const BackwardArgs& args) const;

  const RuntimeOptions& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "MAJOR.MINOR.PATCH"
const char* version();

}  // namespace flashgen
