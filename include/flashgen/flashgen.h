/* flashgen C API: a stable C ABI over the C++ runtime, for FFI (ctypes, other engines).
 *
 * Errors: every call returns a flashgen_status; on failure flashgen_last_error()
 * returns a message (thread-local, valid until the next flashgen call on the same
 * thread) naming the argument, its value and what was expected. No call aborts
 * the process and no C++ exception crosses this boundary.
 *
 * Streams: forward/backward on CUDA buffers are asynchronous on the given stream
 * (a CUstream or cudaStream_t; NULL is the legacy default stream). flashgen never
 * synchronises the stream. CPU buffers run synchronously on the calling thread
 * (plus the runtime's worker threads).
 *
 * Ownership: tensors are borrowed views; flashgen never frees caller memory.
 * A runtime is created by flashgen_runtime_create and freed by flashgen_runtime_destroy.
 *
 * Thread safety: one runtime may be used from many threads at once.
 */
#ifndef FLASHGEN_FLASHGEN_H
#define FLASHGEN_FLASHGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FLASHGEN_API __declspec(dllexport)
#else
#define FLASHGEN_API __attribute__((visibility("default")))
#endif

typedef enum flashgen_status {
  FLASHGEN_OK = 0,
  FLASHGEN_ERROR_INVALID_ARGUMENT = 1,
  FLASHGEN_ERROR_UNSUPPORTED = 2,
  FLASHGEN_ERROR_COMPILE = 3,
  FLASHGEN_ERROR_CUDA = 4,
  FLASHGEN_ERROR_OUT_OF_MEMORY = 5,
  FLASHGEN_ERROR_NO_DEVICE = 6,
  FLASHGEN_ERROR_INTERNAL = 7
} flashgen_status;

typedef enum flashgen_dtype { FLASHGEN_F32 = 0, FLASHGEN_F16 = 1, FLASHGEN_BF16 = 2 } flashgen_dtype;

/* device: FLASHGEN_CPU or a CUDA device ordinal. */
#define FLASHGEN_CPU (-1)

/* A borrowed tensor view; strides in elements. rank 4 for q/k/v/o/grads, 3 for lse. */
typedef struct flashgen_tensor {
  void* data;
  flashgen_dtype dtype;
  int32_t device;
  int32_t rank;
  int64_t shape[4];
  int64_t stride[4];
} flashgen_tensor;

typedef struct flashgen_attention_options {
  float softmax_scale; /* NaN or <= 0: 1/sqrt(head_dim) */
  int32_t causal;
  int32_t window_left;  /* -1: unbounded */
  int32_t window_right; /* -1: unbounded */
  float softcap;        /* 0: off */
  int32_t deterministic;
} flashgen_attention_options;

typedef struct flashgen_forward_args {
  flashgen_tensor q, k, v, o, lse; /* lse.data may be NULL */
  flashgen_attention_options options;
} flashgen_forward_args;

typedef struct flashgen_backward_args {
  flashgen_tensor q, k, v, o, lse, dout, dq, dk, dv;
  flashgen_attention_options options;
  void* workspace; /* optional device buffer; NULL: stream-ordered allocation */
  size_t workspace_bytes;
} flashgen_backward_args;

typedef struct flashgen_runtime_options {
  const char* cache_dir; /* NULL: default */
  int32_t autotune;      /* 0 off, 1 cached, 2 startup, 3 full */
  int32_t cpu_threads;   /* 0: hardware concurrency */
} flashgen_runtime_options;

typedef struct flashgen_runtime flashgen_runtime;

FLASHGEN_API const char* flashgen_version(void);
FLASHGEN_API const char* flashgen_status_string(flashgen_status status);
FLASHGEN_API const char* flashgen_last_error(void);

/* Fills defaults: scale NaN, no causal, no window, no softcap, not deterministic. */
FLASHGEN_API void flashgen_attention_options_init(flashgen_attention_options* options);
/* Fills a contiguous view of the given shape. */
FLASHGEN_API void flashgen_tensor_contiguous(flashgen_tensor* t, void* data, flashgen_dtype dtype, int32_t device,
                                             int32_t rank, const int64_t* shape);

FLASHGEN_API flashgen_status flashgen_runtime_create(const flashgen_runtime_options* options, flashgen_runtime** out);
FLASHGEN_API void flashgen_runtime_destroy(flashgen_runtime* runtime);

FLASHGEN_API flashgen_status flashgen_forward(flashgen_runtime* runtime, const flashgen_forward_args* args, void* stream);
FLASHGEN_API flashgen_status flashgen_backward(flashgen_runtime* runtime, const flashgen_backward_args* args,
                                               void* stream);
FLASHGEN_API flashgen_status flashgen_backward_workspace_bytes(flashgen_runtime* runtime,
                                                               const flashgen_backward_args* args, size_t* bytes);

#ifdef __cplusplus
}
#endif

#endif /* FLASHGEN_FLASHGEN_H */
