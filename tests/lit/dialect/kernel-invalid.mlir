// flash.kernel: the parser's errors, and the verifier, which reports each of
// KernelSpec::problems() (compiler/kernel_spec.cpp) at the op.
// RUN: flashgen-opt %s -split-input-file -verify-diagnostics

// expected-error @+2 {{head_dim: got 300, expected a value in 1..256}}
// expected-error @+1 {{warps: got 3, expected a power of two in 1..16}}
flash.kernel @k fwd for sm_80 {head_dim = 300, dtype = bf16, block_m = 128, block_n = 64, warps = 3, stages = 2}

// -----

// expected-error @+1 {{dtype: got fp32, expected fp16 or bf16 (fp32 runs on the CPU backend only)}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f32, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{stages: got 5, expected 1..4}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 5}

// -----

// expected-error @+2 {{block_m: got 24, expected a multiple of 16 in 16..256}}
// expected-error @+1 {{block_n: got 512, expected a multiple of 16 in 16..256}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 24, block_n = 512, warps = 4, stages = 2}

// -----

// expected-error @+1 {{block_m: got 64 with 8 warps, expected a multiple of 16*warps = 128}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 8, stages = 2}

// -----

// expected-error @+1 {{more than sm_86 allows}}
flash.kernel @k fwd for sm_86 {head_dim = 256, dtype = bf16, block_m = 256, block_n = 256, warps = 16, stages = 4}

// -----

// expected-error @+1 {{attribute 'dtype' failed to satisfy constraint}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = i32, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{unknown kernel pass 'bwd', expected fwd, bwd_preprocess, bwd_dkdv, bwd_dq, bwd_dq_convert, fwd_splitkv, fwd_combine or kv_append}}
flash.kernel @k bwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{unknown arch 'sm_70', expected sm_80, sm_86, sm_89, sm_90 or sm_90a}}
flash.kernel @k fwd for sm_70 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{unknown kernel attribute 'tile', expected head_dim, dtype, block_m}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, tile = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{kernel attribute 'stages' is missing}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4}

// -----

// expected-error @+1 {{'causal' is given twice}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal, causal}

// -----

// expected-error @+1 {{expected 'for'}}
flash.kernel @k fwd sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-error @+1 {{integer value too large}}
flash.kernel @k fwd for sm_80 {head_dim = 99999999999, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}

// -----

// expected-note @+1 {{see existing symbol definition here}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
// expected-error @+1 {{redefinition of symbol named 'k'}}
flash.kernel @k fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
