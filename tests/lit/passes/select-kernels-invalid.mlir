// --flash-select-kernels errors, reported at the op (or the module for options).
// RUN: flashgen-opt %s --split-input-file --flash-select-kernels=arch=sm_90a -verify-diagnostics
// RUN: not flashgen-opt %s --flash-select-kernels=arch=sm_70 2>&1 | FileCheck %s --check-prefix=ARCH
// A symbol already named like the selected kernel's URI, but not that kernel:
// RUN: flashgen-opt %S/Inputs/fwd-d64.mlir --flash-select-kernels=arch=sm_90a > %t.lowered
// RUN: %python %S/Inputs/occupy_kernel_name.py %t.lowered %S/Inputs/fwd-d64.mlir > %t.taken.mlir
// RUN: not flashgen-opt %t.taken.mlir --flash-select-kernels=arch=sm_90a 2>&1 | FileCheck %s --check-prefix=TAKEN

// ARCH: error: --flash-select-kernels: arch 'sm_70' is not one of sm_80, sm_86, sm_89, sm_90, sm_90a
// TAKEN: error: 'flash.attention' op symbol @fwd_d64_fp16_{{[a-z0-9_]+}}_sm_90a exists but is not the kernel of that name

func.func @fp32(%q: tensor<1x32x2x64xf32>) {
  // fp32 runs on the CPU backend only: there is no GPU kernel to select.
  // expected-error @+1 {{no kernel for head_dim 64, fp32, causal on sm_90a: invalid kernel spec fwd_d64_fp32}}
  %o, %lse = flash.attention %q, %q, %q causal : (tensor<1x32x2x64xf32>, tensor<1x32x2x64xf32>, tensor<1x32x2x64xf32>) -> (tensor<1x32x2x64xf32>, tensor<1x2x32xf32>)
  return
}

// -----

func.func @head_dim(%q: tensor<1x16x2x512xf16>, %lse: tensor<1x2x16xf32>) {
  // expected-error @+1 {{no kernel for head_dim 512, fp16, deterministic on sm_90a: invalid kernel spec bwd_preprocess_d512_fp16}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %q deterministic : (tensor<1x16x2x512xf16>, tensor<1x16x2x512xf16>, tensor<1x16x2x512xf16>, tensor<1x16x2x512xf16>, tensor<1x2x16xf32>, tensor<1x16x2x512xf16>) -> (tensor<1x16x2x512xf16>, tensor<1x16x2x512xf16>, tensor<1x16x2x512xf16>)
  return
}
