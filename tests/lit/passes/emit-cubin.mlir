// --flash-emit-cuda with cubin=true ptx=true compiles each kernel through NVRTC
// (no GPU needed) with the runtime's options for its arch.
// RUN: rm -rf %t && flashgen-opt %s --flash-emit-cuda="dir=%t cubin=true ptx=true" -o /dev/null
// RUN: ls %t | FileCheck %s --check-prefix=FILES
// RUN: %python -c "import sys; d = open(sys.argv[1], 'rb').read(); sys.exit(d[:4] != b'\x7fELF')" %t/bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a.cubin
// RUN: FileCheck %s --check-prefix=PTX < %t/bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a.ptx

// FILES: bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a.cu
// FILES-NEXT: bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a.cubin
// FILES-NEXT: bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a.ptx

// PTX: .target sm_90a
// PTX: .entry bwd_preprocess_d64_fp16_m64n64_w4s1_sm_90a(

flash.kernel @pre bwd_preprocess for sm_90a {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 1}
