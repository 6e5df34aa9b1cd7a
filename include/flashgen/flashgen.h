/* flashgen C API: a stable C ABI over the C++ runtime, for FFI (ctypes, other engines).
 *
 * Layout: q (batch, seqlen_q, heads_q, head_dim), k/v (batch, seqlen_k, heads_kv, head_dim),
 * o/dout/dq like q, dk/dv like k: rank 4, any non-negative strides in elements, last dimension
 * contiguous, heads_q % heads_kv == 0. lse: fp32 (batch, heads_q, seqlen_q), rank 3, contiguous,
 * natural log. All tensors of a call share one dtype (lse: fp32) and one device. Packed
 * variable-length sequences (cu_seqlens_q and cu_seqlens_k set): q, o, dout, dq (total_q, heads_q,
 * head_dim), k, v, dk, dv (total_k, heads_kv, head_dim), rank 3; lse (heads_q, total_q), rank 2.
 * FLASHGEN_CPU tensors run on the CPU backend (fp32/fp16/bf16, head_dim 1..1024); CUDA tensors
 * run generated kernels (fp16/bf16, head_dim 1..256, 16-byte aligned data, row strides a
 * multiple of 8 elements when head_dim % 8 == 0).
 *
 * Errors: every call that can fail returns a flashgen_status. flashgen_last_error() then gives
 * a message naming the argument, its value and what was expected. The message is per thread,
 * reset by each status-returning call (empty after success) and valid until the next flashgen
 * call on that thread. FLASHGEN_ERROR_INVALID_ARGUMENT: the arguments are wrong;
 * FLASHGEN_ERROR_UNSUPPORTED: valid but not supported where they live (e.g. fp32 on a GPU);
 * FLASHGEN_ERROR_NO_DEVICE: CUDA tensors on a machine without a usable driver/GPU.
 * Arguments are validated before any work: a call rejected with INVALID_ARGUMENT or
 * UNSUPPORTED has not touched any output.
 * No call aborts the process and no C++ exception crosses this boundary.
 *
 * Streams: on CUDA tensors, forward/backward enqueue their kernels on `stream` (a CUstream or
 * cudaStream_t; NULL is the legacy default stream) and return; outputs are ready when the
 * stream reaches that point. flashgen never synchronises a stream or the device. The first
 * call for a new kernel compiles it (blocking the calling thread, not the stream); later
 * calls hit the cache. On CPU tensors the call is synchronous (the calling thread plus the
 * runtime's worker threads) and `stream` is ignored.
 *
 * Ownership: tensors are borrowed views; flashgen never frees or keeps caller memory. Buffers
 * must stay alive until the call returns (CPU) or the stream work completes (CUDA). A runtime
 * comes from flashgen_runtime_create and is freed by flashgen_runtime_destroy. Strings from
 * flashgen_version and flashgen_status_string are static.
 *
 * Workspace (backward on CUDA tensors): with workspace NULL, flashgen allocates stream-ordered
 * memory on `stream` and frees it on the same stream. Or pass a device buffer of at least
 * flashgen_backward_workspace_bytes() bytes, 16-byte aligned, that nothing else uses until the
 * backward has completed on the stream. CPU tensors need no workspace.
 *
 * Versioned structs: flashgen_forward_args, flashgen_backward_args, flashgen_kv_append_args,
 * flashgen_runtime_options and flashgen_tune_shape begin with struct_size, the sizeof the caller was compiled with; fill
 * them with their _init function (which sets it and every default) before setting fields.
 * Fields are only ever appended: a library reads what the caller's struct_size covers and
 * takes defaults for fields added after it, so a program built against an older header keeps
 * working; a struct larger than the library knows is accepted when its unknown tail is zero
 * and refused (FLASHGEN_ERROR_UNSUPPORTED, naming the byte) otherwise. struct_size below the
 * first versioned layout (0: never initialised) is FLASHGEN_ERROR_INVALID_ARGUMENT. The
 * structs embedded in them (flashgen_tensor, flashgen_attention_options) keep their layout;
 * new options become new fields of the outer struct.
 *
 * Thread safety: one runtime may serve many threads and streams at once; destroy it only when
 * no call on it is in flight. Concurrent calls must not write the same output buffers. The log
 * callback may be called from any thread, concurrently.
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

/* FLASHGEN_INT32: index tensors only (block_table, seqused_k, cu_seqlens_q, cu_seqlens_k). */
typedef enum flashgen_dtype { FLASHGEN_F32 = 0, FLASHGEN_F16 = 1, FLASHGEN_BF16 = 2, FLASHGEN_INT32 = 3 } flashgen_dtype;

/* device: FLASHGEN_CPU or a CUDA device ordinal. */
#define FLASHGEN_CPU (-1)

/* A borrowed tensor view; strides in elements. rank 4 for q/k/v/o/grads, 3 for lse (packed
 * sequences: 3 and 2). */
typedef struct flashgen_tensor {
  void* data;
  flashgen_dtype dtype;
  int32_t device;
  int32_t rank;
  int64_t shape[4];
  int64_t stride[4];
} flashgen_tensor;

typedef struct flashgen_attention_options {
  float softmax_scale; /* NaN: 1/sqrt(head_dim); otherwise finite and > 0 */
  int32_t causal;       /* nonzero: bottom-right aligned causal mask (sets window_right to 0) */
  int32_t window_left;  /* -1: unbounded */
  int32_t window_right; /* -1: unbounded */
  float softcap;        /* 0: off; else softcap * tanh(s / softcap), finite and > 0 */
  int32_t deterministic; /* nonzero: bitwise-reproducible gradients */
} flashgen_attention_options;

/* Outputs (o, lse; dq, dk, dv) must not share memory with any input or with each other, and
 * every output element needs an address of its own (no zero or interleaving strides); views
 * of one buffer that interleave without sharing elements (packed q/k/v, dq/dk/dv) are fine.
 * Inputs may overlap and use zero strides. Violations: FLASHGEN_ERROR_INVALID_ARGUMENT. */
typedef struct flashgen_forward_args {
  size_t struct_size;              /* sizeof(flashgen_forward_args): flashgen_forward_args_init sets it */
  flashgen_tensor q, k, v, o, lse; /* lse.data may be NULL */
  flashgen_attention_options options;
  /* Appended after the first versioned layout (zero: absent). A paged KV cache and per-sequence key counts, as
   * flashgen::ForwardArgs::block_table and ::seqused_k describe them (flashgen.hpp). */
  flashgen_tensor block_table; /* int32 (batch, max_pages_per_seq); data NULL: dense k, v */
  flashgen_tensor seqused_k;   /* int32 (batch,); data NULL: every sequence has seqlen_k keys */
  /* Appended after seqused_k (zero: absent). Packed variable-length sequences, as
   * flashgen::PackedSequences describes them (flashgen.hpp); with a KV cache only the queries are packed
   * (cu_seqlens_k NULL, max_seqlen_k 0: flashgen::ForwardArgs::varlen). */
  flashgen_tensor cu_seqlens_q; /* int32 (batch + 1,) row offsets of the sequences in q; data NULL: a dense batch */
  flashgen_tensor cu_seqlens_k; /* int32 (batch + 1,) row offsets in k and v; set together with cu_seqlens_q */
  int64_t max_seqlen_q;         /* >= 1 with cu_seqlens: a bound on every sequence's queries */
  int64_t max_seqlen_k;         /* >= 1 with cu_seqlens_k: a bound on every sequence's keys */
  /* split-KV decode's key splits (flashgen::ForwardArgs::num_splits): 0 automatic, 1 unsplit, 2..128 */
  int32_t num_splits;
} flashgen_forward_args;

typedef struct flashgen_backward_args {
  size_t struct_size; /* sizeof(flashgen_backward_args): flashgen_backward_args_init sets it */
  flashgen_tensor q, k, v, o, lse, dout, dq, dk, dv;
  flashgen_attention_options options;
  void* workspace; /* optional device buffer; NULL: stream-ordered allocation */
  size_t workspace_bytes;
  /* Appended after the first versioned layout (zero: absent). Packed variable-length sequences,
   * as the forward had them (flashgen_forward_args). */
  flashgen_tensor cu_seqlens_q;
  flashgen_tensor cu_seqlens_k;
  int64_t max_seqlen_q;
  int64_t max_seqlen_k;
} flashgen_backward_args;

/* New keys and values appended to a KV cache (and optionally rotated), as flashgen::KvAppendArgs
 * describes them (flashgen.hpp): row i of sequence b of k and v goes to position
 * cache_seqlens[b] + i of k_cache and v_cache, dense (batch, capacity, heads_kv, head_dim) or
 * pages (num_pages, page_size, heads_kv, head_dim) named by block_table. With rotary_cos and
 * rotary_sin ((positions, rotary_dim / 2), dtype of k, positions >= the capacity) the new keys
 * are rotated at their positions, and q (when set) into q_rotated (which may be q itself). */
typedef struct flashgen_kv_append_args {
  size_t struct_size; /* sizeof(flashgen_kv_append_args): flashgen_kv_append_args_init sets it */
  flashgen_tensor k, v;             /* new rows (batch, seqlen_new, heads_kv, head_dim) */
  flashgen_tensor k_cache, v_cache; /* written in place */
  flashgen_tensor block_table;      /* int32 (batch, max_pages_per_seq); data NULL: a dense cache */
  flashgen_tensor cache_seqlens;    /* int32 (batch,): where each sequence's new rows start */
  flashgen_tensor rotary_cos, rotary_sin; /* data NULL: no rotary */
  int32_t rotary_interleaved;             /* nonzero: pairs (2j, 2j + 1) (GPT-J); else (j, j + rotary_dim / 2) */
  int32_t q_at_consecutive_positions;     /* nonzero (the default): q row i at cache_seqlens[b] + i */
  flashgen_tensor q, q_rotated;           /* data NULL: q not rotated */
  /* Appended after the first versioned layout (zero: absent). Packed new rows, as
   * flashgen::KvAppendArgs::cu_seqlens describes them: k, v (and q) (total, heads, head_dim). */
  flashgen_tensor cu_seqlens; /* int32 (batch + 1,); data NULL: k, v are (batch, seqlen_new, heads_kv, head_dim) */
} flashgen_kv_append_args;

/* Log levels: 0 debug, 1 info, 2 warning, 3 error. `message` is valid during the call only. */
typedef void (*flashgen_log_fn)(int32_t level, const char* message, void* user_data);

typedef struct flashgen_runtime_options {
  size_t struct_size;    /* sizeof(flashgen_runtime_options): flashgen_runtime_options_init sets it */
  const char* cache_dir; /* NULL or "": $FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen or ~/.cache/flashgen */
  int32_t autotune;      /* 0 off, 1 cached, 2 startup, 3 full */
  int32_t cpu_threads;   /* CPU backend threads, >= 0; 0: hardware concurrency */
  flashgen_log_fn log;   /* NULL: warnings and errors go to stderr */
  void* log_user_data;   /* passed to log as is */
  /* Appended after the first versioned layout (zero: absent). The kernel set a package ships
   * (one warmed directory per NVRTC release, `flashgen cache warm --package`), searched before
   * compiling and loaded without NVRTC. NULL or "": $FLASHGEN_PACKAGED_KERNELS, else none. */
  const char* packaged_kernels;
  /* Appended in session 12. 1 (the default): while a variant's own kernels compile, its dense
   * calls run on the next head-dim class's ready kernels (64, 128, 256) over zero-padded
   * copies; 0: they wait for the compile. $FLASHGEN_SUBSTITUTE_KERNELS, when set, overrides. */
  int32_t substitute_while_compiling;
} flashgen_runtime_options;

typedef struct flashgen_runtime flashgen_runtime;

FLASHGEN_API const char* flashgen_version(void);
FLASHGEN_API const char* flashgen_status_string(flashgen_status status);
FLASHGEN_API const char* flashgen_last_error(void);

/* Fills defaults: scale NaN, no causal, no window, no softcap, not deterministic. */
FLASHGEN_API void flashgen_attention_options_init(flashgen_attention_options* options);
/* Fills struct_size and defaults: default cache directory, autotune 1 (cached), hardware
 * threads, stderr log. */
FLASHGEN_API void flashgen_runtime_options_init(flashgen_runtime_options* options);
/* Fill struct_size, null tensors (rank 0), default options, no workspace and no packed sequences. */
FLASHGEN_API void flashgen_forward_args_init(flashgen_forward_args* args);
FLASHGEN_API void flashgen_backward_args_init(flashgen_backward_args* args);
/* Fills struct_size, null tensors, no rotary, q_at_consecutive_positions 1. */
FLASHGEN_API void flashgen_kv_append_args_init(flashgen_kv_append_args* args);
/* Fills a contiguous (row-major) view of the given shape: rank 4 (q, k, v, ...), 3 (lse, packed
 * q, k, v, ...), 2 (block_table, packed lse) or 1 (seqused_k, cu_seqlens); the unused trailing
 * entries are 1. Any other rank is kept
 * so that the call using the view rejects it. */
FLASHGEN_API void flashgen_tensor_contiguous(flashgen_tensor* t, void* data, flashgen_dtype dtype, int32_t device,
                                             int32_t rank, const int64_t* shape);

/* NVRTC is loaded on the first CUDA compile, from $FLASHGEN_NVRTC when set, else from the
 * candidates added here (in call order), $CUDA_HOME/lib64, $CUDA_PATH/lib64,
 * /usr/local/cuda/lib64 and the system library path; the first NVRTC 12.4+ or 13.x wins.
 * `path`: a libnvrtc file (the Python package adds pip's nvidia-cuda-nvrtc wheels);
 * `origin`: where it comes from, for the error that lists every place looked (NULL: "the host
 * program"). FLASHGEN_ERROR_INVALID_ARGUMENT once NVRTC has been looked for. */
FLASHGEN_API flashgen_status flashgen_add_nvrtc_candidate(const char* path, const char* origin);

/* options NULL: defaults. On success *out is the new runtime; on failure NULL. */
FLASHGEN_API flashgen_status flashgen_runtime_create(const flashgen_runtime_options* options, flashgen_runtime** out);
/* NULL is a no-op. */
FLASHGEN_API void flashgen_runtime_destroy(flashgen_runtime* runtime);

FLASHGEN_API flashgen_status flashgen_forward(flashgen_runtime* runtime, const flashgen_forward_args* args, void* stream);
FLASHGEN_API flashgen_status flashgen_backward(flashgen_runtime* runtime, const flashgen_backward_args* args,
                                               void* stream);
/* Runtime::append_kv: the new rows written into the cache (kernels on `stream` for CUDA tensors,
 * positions read on the device: CUDA-graph safe). */
FLASHGEN_API flashgen_status flashgen_append_kv(flashgen_runtime* runtime, const flashgen_kv_append_args* args,
                                                void* stream);
/* Runtime::prepare: starts compiling the GPU kernels of these forward arguments' forward
   (passes bit FLASHGEN_PASS_FORWARD) and/or backward (FLASHGEN_PASS_BACKWARD) on the
   runtime's compile threads and returns at once; validates args as flashgen_forward does. */
#define FLASHGEN_PASS_FORWARD 1u
#define FLASHGEN_PASS_BACKWARD 2u
FLASHGEN_API flashgen_status flashgen_prepare(flashgen_runtime* runtime, const flashgen_forward_args* args,
                                              unsigned passes);
/* Bytes of device workspace backward needs for these arguments (0 for CPU tensors); validates them. */
FLASHGEN_API flashgen_status flashgen_backward_workspace_bytes(flashgen_runtime* runtime,
                                                               const flashgen_backward_args* args, size_t* bytes);

/* A problem declared for autotuning (flashgen::TuneShape). Tuning is per sequence-length
 * bucket (the power of 4 nearest to max(seqlen_q, seqlen_k), from 256); batch and heads
 * do not matter. */
typedef struct flashgen_tune_shape {
  size_t struct_size; /* sizeof(flashgen_tune_shape): flashgen_tune_shape_init sets it; the array's stride */
  int32_t head_dim;
  flashgen_dtype dtype; /* FLASHGEN_F16 or FLASHGEN_BF16 */
  int64_t seqlen_q;
  int64_t seqlen_k;
  flashgen_attention_options options; /* causal, window, softcap, deterministic select the kernels */
  int32_t forward;                    /* nonzero: tune the forward pass */
  int32_t backward;                   /* nonzero: tune the backward pass */
  int32_t device;                     /* CUDA device ordinal */
} flashgen_tune_shape;

/* Fills struct_size and defaults: head_dim 128, bf16, 4096 x 4096, default options, forward and
 * backward, device 0. */
FLASHGEN_API void flashgen_tune_shape_init(flashgen_tune_shape* shape);

/* Tunes `count` shapes now (compile candidates in parallel, time each on the GPU) and persists
 * the winners in <cache dir>/autotune.json, where runtimes with autotune >= 1 (cached) find
 * them; retune nonzero also retunes shapes that already have a winner. Blocks and synchronises
 * the device. FLASHGEN_ERROR_NO_DEVICE without a GPU. */
FLASHGEN_API flashgen_status flashgen_tune(flashgen_runtime* runtime, const flashgen_tune_shape* shapes, size_t count,
                                           int32_t retune);

#ifdef __cplusplus
}
#endif

#endif /* FLASHGEN_FLASHGEN_H */
