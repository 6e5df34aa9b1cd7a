/* Compiled as C11: flashgen.h is a valid C header, and a C caller can run attention
 * with nothing but the header's own helpers. c_api_test.cpp checks the results. */
#include <stddef.h>

#include "flashgen/flashgen.h"

flashgen_status c_caller_forward_fp32(float* q, float* k, float* v, float* o, float* lse, const int64_t* q_shape,
                                      const int64_t* k_shape, int32_t causal);

flashgen_status c_caller_forward_fp32(float* q, float* k, float* v, float* o, float* lse, const int64_t* q_shape,
                                      const int64_t* k_shape, int32_t causal) {
  flashgen_runtime* runtime = NULL;
  flashgen_status status = flashgen_runtime_create(NULL, &runtime);
  if (status != FLASHGEN_OK) return status;

  flashgen_forward_args args;
  flashgen_forward_args_init(&args);
  const int64_t lse_shape[3] = {q_shape[0], q_shape[2], q_shape[1]};
  flashgen_tensor_contiguous(&args.q, q, FLASHGEN_F32, FLASHGEN_CPU, 4, q_shape);
  flashgen_tensor_contiguous(&args.k, k, FLASHGEN_F32, FLASHGEN_CPU, 4, k_shape);
  flashgen_tensor_contiguous(&args.v, v, FLASHGEN_F32, FLASHGEN_CPU, 4, k_shape);
  flashgen_tensor_contiguous(&args.o, o, FLASHGEN_F32, FLASHGEN_CPU, 4, q_shape);
  flashgen_tensor_contiguous(&args.lse, lse, FLASHGEN_F32, FLASHGEN_CPU, 3, lse_shape);
  flashgen_attention_options_init(&args.options);
  args.options.causal = causal;

  status = flashgen_forward(runtime, &args, NULL);
  flashgen_runtime_destroy(runtime);
  return status;
}
