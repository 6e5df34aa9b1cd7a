// --flash-emit-cuda writes <dir>/<uri>.cu for every flash.kernel and leaves the IR alone.
// RUN: rm -rf %t && flashgen-opt %s --flash-emit-cuda=dir=%t | FileCheck %s --check-prefix=IR
// RUN: ls %t | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --check-prefix=SRC < %t/fwd_d128_bf16_m128n64_w4s2_causal_sm_80.cu
// RUN: not flashgen-opt %s --flash-emit-cuda 2>&1 | FileCheck %s --check-prefix=NODIR

// IR: flash.kernel @fwd_d128_bf16_m128n64_w4s2_causal_sm_80 fwd for sm_80
// IR: flash.kernel @convert bwd_dq_convert for sm_90a

// Files are named by the spec's URI, not the symbol: @convert and @same_spec share one.
// FILES: bwd_dq_convert_d64_fp16_m64n64_w4s1_sm_90a.cu
// FILES-NEXT: fwd_d128_bf16_m128n64_w4s2_causal_sm_80.cu
// FILES-NOT: .cu

// SRC: extern "C" __global__
// SRC-SAME: fwd_d128_bf16_m128n64_w4s2_causal_sm_80

// NODIR: error: --flash-emit-cuda needs dir=<directory>

flash.kernel @fwd_d128_bf16_m128n64_w4s2_causal_sm_80 fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal}
flash.kernel @convert bwd_dq_convert for sm_90a {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 1}
flash.kernel @same_spec bwd_dq_convert for sm_90a {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 1}
