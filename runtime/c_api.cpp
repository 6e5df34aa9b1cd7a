// The C ABI (flashgen.h) over the C++ runtime: converts the C structs, and turns every
// exception into a status plus a thread-local message so nothing crosses the boundary.
#include "flashgen/flashgen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/c_api.h"
#include "runtime/nvrtc_library.h"

struct flashgen_runtime {
  explicit flashgen_runtime(flashgen::RuntimeOptions options) : runtime(std::move(options)) {}
  flashgen::Runtime runtime;
};

namespace {

using flashgen::Error;
using flashgen::Status;

static_assert(static_cast<int>(Status::internal) == FLASHGEN_ERROR_INTERNAL, "status codes are the C ABI's");
static_assert(sizeof(flashgen_dtype) == sizeof(std::int32_t), "flashgen_tensor.dtype is a 32-bit field for FFI");

std::string& last_error() {
  thread_local std::string message;
  return message;
}

flashgen_status record(flashgen_status status, const char* message) noexcept {
  try {
    last_error() = message;
  } catch (...) {
    last_error().clear();  // no memory for the message: the status still tells what happened
  }
  return status;
}

template <typename T>
void require(const T* p, const char* name, const char* expected) {
  if (p == nullptr) throw Error(Status::invalid_argument, fmt::format("{}: is null, expected {}", name, expected));
}

// The versioned structs (flashgen.h, "Versioned structs"): each one's first layout ends after
// its last field below. Never change these: new fields go after them.
template <typename T>
struct FirstLayout;
template <>
struct FirstLayout<flashgen_forward_args> {
  static constexpr const char* name = "flashgen_forward_args";
  static constexpr std::size_t end = offsetof(flashgen_forward_args, options) + sizeof(flashgen_attention_options);
};
template <>
struct FirstLayout<flashgen_backward_args> {
  static constexpr const char* name = "flashgen_backward_args";
  static constexpr std::size_t end = offsetof(flashgen_backward_args, workspace_bytes) + sizeof(size_t);
};
template <>
struct FirstLayout<flashgen_kv_append_args> {
  static constexpr const char* name = "flashgen_kv_append_args";
  static constexpr std::size_t end = offsetof(flashgen_kv_append_args, q_rotated) + sizeof(flashgen_tensor);
};
template <>
struct FirstLayout<flashgen_runtime_options> {
  static constexpr const char* name = "flashgen_runtime_options";
  static constexpr std::size_t end = offsetof(flashgen_runtime_options, log_user_data) + sizeof(void*);
};
template <>
struct FirstLayout<flashgen_tune_shape> {
  static constexpr const char* name = "flashgen_tune_shape";
  static constexpr std::size_t end = offsetof(flashgen_tune_shape, device) + sizeof(std::int32_t);
};

std::size_t struct_size_of(const void* p) {
  std::size_t size = 0;
  std::memcpy(&size, p, sizeof size);
  return size;
}

// A caller's versioned struct (`what` names it in messages) as this library's: the bytes its
// struct_size covers over the defaults `init` fills; a larger struct's unknown tail must be
// zero. A struct_size far beyond this library's (garbage, not a newer header) is refused
// before any byte past sizeof(T) is read.
constexpr std::size_t kMaxUnknownTail = 1024;

template <typename T>
T versioned(const void* in, const std::string& what, void (*init)(T*)) {
  const std::size_t size = struct_size_of(in);
  if (size < FirstLayout<T>::end || size > sizeof(T) + kMaxUnknownTail)
    throw Error(Status::invalid_argument,
                fmt::format("{}.struct_size: is {}, expected sizeof({}) = {} (fill the struct with {}_init first)",
                            what, size, FirstLayout<T>::name, sizeof(T), FirstLayout<T>::name));
  if (size > sizeof(T)) {
    const auto* bytes = static_cast<const unsigned char*>(in);
    for (std::size_t i = sizeof(T); i < size; ++i)
      if (bytes[i] != 0)
        throw Error(Status::unsupported,
                    fmt::format("{}: byte {} of its {} is set, a field this flashgen ({}, sizeof({}) = {}) does not "
                                "know; use a newer flashgen or leave it zero",
                                what, i, size, flashgen::version(), FirstLayout<T>::name, sizeof(T)));
  }
  T out;
  init(&out);
  std::memcpy(&out, in, std::min(size, sizeof(T)));
  out.struct_size = sizeof(T);
  return out;
}

flashgen::Tensor to_cpp(const flashgen_tensor& t) {
  std::int32_t dtype = 0;  // read as an integer: FFI callers may pass any value, validation names it
  std::memcpy(&dtype, &t.dtype, sizeof dtype);
  flashgen::Tensor out;
  out.data = t.data;
  out.dtype = static_cast<flashgen::DType>(dtype);
  out.device = t.device;
  out.rank = t.rank;
  for (int i = 0; i < 4; ++i) {
    out.shape[i] = t.shape[i];
    out.stride[i] = t.stride[i];
  }
  return out;
}

flashgen::AttentionOptions to_cpp(const flashgen_attention_options& o) {
  flashgen::AttentionOptions out;
  out.softmax_scale = o.softmax_scale;
  out.causal = o.causal != 0;
  out.window_left = o.window_left;
  out.window_right = o.window_right;
  out.softcap = o.softcap;
  out.deterministic = o.deterministic != 0;
  return out;
}

// Packed sequences: the same four fields in both argument structs.
template <typename Args>
flashgen::PackedSequences to_cpp_varlen(const Args& a) {
  return {to_cpp(a.cu_seqlens_q), to_cpp(a.cu_seqlens_k), a.max_seqlen_q, a.max_seqlen_k};
}

flashgen::ForwardArgs to_cpp(const flashgen_forward_args& in) {
  const flashgen_forward_args a = versioned(&in, "args", &flashgen_forward_args_init);
  flashgen::ForwardArgs out;
  out.q = to_cpp(a.q);
  out.k = to_cpp(a.k);
  out.v = to_cpp(a.v);
  out.o = to_cpp(a.o);
  out.lse = to_cpp(a.lse);
  out.options = to_cpp(a.options);
  out.block_table = to_cpp(a.block_table);
  out.seqused_k = to_cpp(a.seqused_k);
  out.varlen = to_cpp_varlen(a);
  out.num_splits = a.num_splits;
  return out;
}

flashgen::KvAppendArgs to_cpp(const flashgen_kv_append_args& in) {
  const flashgen_kv_append_args a = versioned(&in, "args", &flashgen_kv_append_args_init);
  flashgen::KvAppendArgs out;
  out.k = to_cpp(a.k);
  out.v = to_cpp(a.v);
  out.k_cache = to_cpp(a.k_cache);
  out.v_cache = to_cpp(a.v_cache);
  out.block_table = to_cpp(a.block_table);
  out.cache_seqlens = to_cpp(a.cache_seqlens);
  out.rotary.cos = to_cpp(a.rotary_cos);
  out.rotary.sin = to_cpp(a.rotary_sin);
  out.rotary.interleaved = a.rotary_interleaved != 0;
  out.q_at_consecutive_positions = a.q_at_consecutive_positions != 0;
  out.q = to_cpp(a.q);
  out.q_rotated = to_cpp(a.q_rotated);
  out.cu_seqlens = to_cpp(a.cu_seqlens);
  return out;
}

flashgen::BackwardArgs to_cpp(const flashgen_backward_args& in) {
  const flashgen_backward_args a = versioned(&in, "args", &flashgen_backward_args_init);
  flashgen::BackwardArgs out;
  out.q = to_cpp(a.q);
  out.k = to_cpp(a.k);
  out.v = to_cpp(a.v);
  out.o = to_cpp(a.o);
  out.lse = to_cpp(a.lse);
  out.dout = to_cpp(a.dout);
  out.dq = to_cpp(a.dq);
  out.dk = to_cpp(a.dk);
  out.dv = to_cpp(a.dv);
  out.options = to_cpp(a.options);
  out.workspace = a.workspace;
  out.workspace_bytes = a.workspace_bytes;
  out.varlen = to_cpp_varlen(a);
  return out;
}

}  // namespace

namespace flashgen::c_api {

flashgen_status guarded(const std::function<void()>& body) noexcept {
  last_error().clear();
  try {
    body();
    return FLASHGEN_OK;
  } catch (const Error& e) {
    const int s = static_cast<int>(e.status());
    const bool known = s > FLASHGEN_OK && s <= FLASHGEN_ERROR_INTERNAL;
    return record(known ? static_cast<flashgen_status>(s) : FLASHGEN_ERROR_INTERNAL, e.what());
  } catch (const std::bad_alloc&) {
    return record(FLASHGEN_ERROR_OUT_OF_MEMORY, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return record(FLASHGEN_ERROR_INTERNAL, e.what());
  } catch (...) {
    return record(FLASHGEN_ERROR_INTERNAL, "unknown exception inside flashgen");
  }
}

RuntimeOptions runtime_options(const flashgen_runtime_options& in) {
  const flashgen_runtime_options o = versioned(&in, "options", &flashgen_runtime_options_init);
  RuntimeOptions out;
  if (o.cache_dir != nullptr) out.cache_dir = o.cache_dir;
  if (o.autotune < 0 || o.autotune > static_cast<int>(AutotunePolicy::full))
    throw Error(Status::invalid_argument,
                fmt::format("options.autotune: is {}, expected 0 (off), 1 (cached), 2 (startup) or 3 (full)", o.autotune));
  out.autotune = static_cast<AutotunePolicy>(o.autotune);
  if (o.cpu_threads < 0)
    throw Error(Status::invalid_argument,
                fmt::format("options.cpu_threads: is {}, expected >= 0 (0 = hardware concurrency)", o.cpu_threads));
  out.cpu_threads = o.cpu_threads;
  if (o.packaged_kernels != nullptr) out.packaged_kernels = o.packaged_kernels;
  if (o.substitute_while_compiling != 0 && o.substitute_while_compiling != 1)
    throw Error(Status::invalid_argument, fmt::format("options.substitute_while_compiling: is {}, expected 0 or 1",
                                                      o.substitute_while_compiling));
  out.substitute_while_compiling = o.substitute_while_compiling == 1;
  if (o.log != nullptr)
    out.log = [log = o.log, user = o.log_user_data](LogLevel level, const std::string& message) {
      log(static_cast<std::int32_t>(level), message.c_str(), user);
    };
  return out;
}

}  // namespace flashgen::c_api

extern "C" {

const char* flashgen_version(void) { return flashgen::version(); }

const char* flashgen_status_string(flashgen_status status) {
  const int s = static_cast<int>(status);
  if (s < FLASHGEN_OK || s > FLASHGEN_ERROR_INTERNAL) return "unknown status";
  return flashgen::to_string(static_cast<Status>(s));
}

const char* flashgen_last_error(void) { return last_error().c_str(); }

flashgen_status flashgen_add_nvrtc_candidate(const char* path, const char* origin) {
  return flashgen::c_api::guarded([&] {
    require(path, "path", "the path of a libnvrtc file");
    flashgen::add_nvrtc_candidate({path, origin != nullptr ? origin : "the host program"});
  });
}

void flashgen_attention_options_init(flashgen_attention_options* options) {
  if (options == nullptr) return;
  options->softmax_scale = std::numeric_limits<float>::quiet_NaN();
  options->causal = 0;
  options->window_left = -1;
  options->window_right = -1;
  options->softcap = 0.0f;
  options->deterministic = 0;
}

void flashgen_runtime_options_init(flashgen_runtime_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->cache_dir = nullptr;
  options->autotune = static_cast<std::int32_t>(flashgen::RuntimeOptions{}.autotune);
  options->cpu_threads = 0;
  options->log = nullptr;
  options->log_user_data = nullptr;
  options->packaged_kernels = nullptr;
  options->substitute_while_compiling = flashgen::RuntimeOptions{}.substitute_while_compiling ? 1 : 0;
}

void flashgen_forward_args_init(flashgen_forward_args* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  flashgen_attention_options_init(&args->options);
}

void flashgen_backward_args_init(flashgen_backward_args* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  flashgen_attention_options_init(&args->options);
}

void flashgen_kv_append_args_init(flashgen_kv_append_args* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->q_at_consecutive_positions = 1;
}

void flashgen_tune_shape_init(flashgen_tune_shape* shape) {
  if (shape == nullptr) return;
  std::memset(shape, 0, sizeof *shape);
  shape->struct_size = sizeof *shape;
  shape->head_dim = 128;
  shape->dtype = FLASHGEN_BF16;
  shape->seqlen_q = shape->seqlen_k = 4096;
  flashgen_attention_options_init(&shape->options);
  shape->forward = shape->backward = 1;
  shape->device = 0;
}

void flashgen_tensor_contiguous(flashgen_tensor* t, void* data, flashgen_dtype dtype, int32_t device, int32_t rank,
                                const int64_t* shape) {
  if (t == nullptr) return;
  std::memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dtype;
  t->device = device;
  t->rank = rank;
  if (shape == nullptr || rank < 1 || rank > 4) return;  // zero sizes: the call using t rejects it
  // A stride past int64 would wrap (to 0 for {4, 2^31, 2^31, 4}); INT64_MAX instead makes
  // the call using t reject the view as spanning more than 2^63 bytes.
  std::int64_t stride = 1;
  bool overflow = false;
  for (int i = rank - 1; i >= 0; --i) {
    t->shape[i] = shape[i];
    t->stride[i] = overflow ? INT64_MAX : stride;
    overflow = overflow || __builtin_mul_overflow(stride, shape[i], &stride);
  }
  for (int i = rank; i < 4; ++i) t->shape[i] = t->stride[i] = 1;
}

flashgen_status flashgen_runtime_create(const flashgen_runtime_options* options, flashgen_runtime** out) {
  return flashgen::c_api::guarded([&] {
    require(out, "out", "a pointer to receive the runtime");
    *out = nullptr;
    flashgen_runtime_options defaults;
    flashgen_runtime_options_init(&defaults);
    *out = new flashgen_runtime(flashgen::c_api::runtime_options(options != nullptr ? *options : defaults));
  });
}

void flashgen_runtime_destroy(flashgen_runtime* runtime) { delete runtime; }

flashgen_status flashgen_forward(flashgen_runtime* runtime, const flashgen_forward_args* args, void* stream) {
  return flashgen::c_api::guarded([&] {
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    require(args, "args", "the forward arguments");
    runtime->runtime.forward(to_cpp(*args), stream);
  });
}

flashgen_status flashgen_append_kv(flashgen_runtime* runtime, const flashgen_kv_append_args* args, void* stream) {
  return flashgen::c_api::guarded([&] {
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    require(args, "args", "the KV append arguments");
    runtime->runtime.append_kv(to_cpp(*args), stream);
  });
}

flashgen_status flashgen_prepare(flashgen_runtime* runtime, const flashgen_forward_args* args, unsigned passes) {
  return flashgen::c_api::guarded([&] {
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    require(args, "args", "the forward arguments");
    runtime->runtime.prepare(to_cpp(*args), static_cast<flashgen::Passes>(passes));
  });
}

flashgen_status flashgen_backward(flashgen_runtime* runtime, const flashgen_backward_args* args, void* stream) {
  return flashgen::c_api::guarded([&] {
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    require(args, "args", "the backward arguments");
    runtime->runtime.backward(to_cpp(*args), stream);
  });
}

flashgen_status flashgen_backward_workspace_bytes(flashgen_runtime* runtime, const flashgen_backward_args* args,
                                                  size_t* bytes) {
  return flashgen::c_api::guarded([&] {
    require(bytes, "bytes", "a pointer to receive the workspace size");
    *bytes = 0;
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    require(args, "args", "the backward arguments");
    *bytes = runtime->runtime.backward_workspace_bytes(to_cpp(*args));
  });
}

flashgen_status flashgen_tune(flashgen_runtime* runtime, const flashgen_tune_shape* shapes, size_t count,
                              int32_t retune) {
  return flashgen::c_api::guarded([&] {
    require(runtime, "runtime", "a runtime from flashgen_runtime_create");
    if (count > 0) require(shapes, "shapes", "an array of count shapes");
    // The array's stride is the caller's struct_size (an older or newer header's sizeof).
    const std::size_t stride = count > 0 ? struct_size_of(shapes) : 0;
    std::vector<flashgen::TuneShape> cpp;
    for (size_t i = 0; i < count; ++i) {
      const void* at = reinterpret_cast<const unsigned char*>(shapes) + i * stride;
      if (struct_size_of(at) != stride)
        throw flashgen::Error(flashgen::Status::invalid_argument,
                              fmt::format("shapes[{}].struct_size: is {}, expected {} as shapes[0]'s (one array)", i,
                                          struct_size_of(at), stride));
      const flashgen_tune_shape c = versioned(at, fmt::format("shapes[{}]", i), &flashgen_tune_shape_init);
      std::int32_t dtype = 0;  // read as an integer, as to_cpp does: any value may arrive
      std::memcpy(&dtype, &c.dtype, sizeof dtype);
      if (dtype != FLASHGEN_F32 && dtype != FLASHGEN_F16 && dtype != FLASHGEN_BF16)
        throw flashgen::Error(flashgen::Status::invalid_argument,
                              fmt::format("shapes[{}].dtype: is {}, expected FLASHGEN_F32 (0), FLASHGEN_F16 (1) or "
                                          "FLASHGEN_BF16 (2)",
                                          i, dtype));
      flashgen::TuneShape s;
      s.head_dim = c.head_dim;
      s.dtype = static_cast<flashgen::DType>(dtype);
      s.seqlen_q = c.seqlen_q;
      s.seqlen_k = c.seqlen_k;
      s.options = to_cpp(c.options);
      s.forward = c.forward != 0;
      s.backward = c.backward != 0;
      s.device = c.device;
      cpp.push_back(s);
    }
    runtime->runtime.tune(cpp, retune != 0);
  });
}

}  // extern "C"
