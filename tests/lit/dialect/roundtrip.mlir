// Print -> parse -> print is stable, and the custom formats read as written.
// RUN: flashgen-opt %s | flashgen-opt | FileCheck %s
// RUN: flashgen-opt %s | flashgen-opt > %t.1 && flashgen-opt %t.1 > %t.2 && diff %t.1 %t.2
// Generic form round trip too.
// RUN: flashgen-opt %s --mlir-print-op-generic | flashgen-opt | FileCheck %s

// CHECK: flash.kernel @fwd_d128_bf16_m128n64_w4s2_causal_sm_80 fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal}
flash.kernel @fwd_d128_bf16_m128n64_w4s2_causal_sm_80 fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal}

// Keys in any order on input; printed in KernelSpec's order.
// CHECK: flash.kernel @dkdv bwd_dkdv for sm_90a {head_dim = 64, dtype = f16, block_m = 64, block_n = 128, warps = 8, stages = 2, causal, window, softcap, deterministic}
flash.kernel @dkdv bwd_dkdv for sm_90a {deterministic, softcap, window, causal, stages = 2, warps = 8, block_n = 128, block_m = 64, dtype = f16, head_dim = 64}

// CHECK: flash.kernel @pre bwd_preprocess for sm_86 {head_dim = 256, dtype = bf16, block_m = 64, block_n = 64, warps = 4, stages = 1}
flash.kernel @pre bwd_preprocess for sm_86 {head_dim = 256, dtype = bf16, block_m = 64, block_n = 64, warps = 4, stages = 1}
// CHECK: flash.kernel @dq bwd_dq for sm_89 {head_dim = 40, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 2, window}
flash.kernel @dq bwd_dq for sm_89 {head_dim = 40, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 2, window}
// CHECK: flash.kernel @convert bwd_dq_convert for sm_90 {head_dim = 96, dtype = bf16, block_m = 64, block_n = 64, warps = 4, stages = 1, softcap}
flash.kernel @convert bwd_dq_convert for sm_90 {head_dim = 96, dtype = bf16, block_m = 64, block_n = 64, warps = 4, stages = 1, softcap}

// CHECK-LABEL: func.func @forward
func.func @forward(%q: tensor<?x?x8x128xbf16>, %k: tensor<?x?x2x128xbf16>, %v: tensor<?x?x2x128xbf16>)
    -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = flash.attention %{{.*}}, %{{.*}}, %{{.*}} causal window = [256, 0] softcap = 3.000000e+01 softmax_scale = 1.250000e-01 deterministic : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>) -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
  %o, %lse = flash.attention %q, %k, %v causal window = [256, 0] softcap = 30.0 softmax_scale = 0.125 deterministic
      : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>) -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
  return %o, %lse : tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>
}

// CHECK-LABEL: func.func @forward_plain
func.func @forward_plain(%q: tensor<2x100x4x64xf16>, %kv: tensor<2x37x4x64xf16>)
    -> (tensor<2x100x4x64xf16>, tensor<2x4x100xf32>) {
  // CHECK: flash.attention %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x100x4x64xf16>, tensor<2x37x4x64xf16>, tensor<2x37x4x64xf16>) -> (tensor<2x100x4x64xf16>, tensor<2x4x100xf32>)
  %o, %lse = flash.attention %q, %kv, %kv
      : (tensor<2x100x4x64xf16>, tensor<2x37x4x64xf16>, tensor<2x37x4x64xf16>) -> (tensor<2x100x4x64xf16>, tensor<2x4x100xf32>)
  return %o, %lse : tensor<2x100x4x64xf16>, tensor<2x4x100xf32>
}

// CHECK-LABEL: func.func @backward
func.func @backward(%q: tensor<?x?x6x96xf32>, %k: tensor<?x?x3x96xf32>, %v: tensor<?x?x3x96xf32>,
                    %o: tensor<?x?x6x96xf32>, %lse: tensor<?x6x?xf32>, %do: tensor<?x?x6x96xf32>)
    -> (tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>) {
  // CHECK: flash.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} window = [-1, 64] softcap = 5.000000e+00 : (tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x6x96xf32>, tensor<?x6x?xf32>, tensor<?x?x6x96xf32>) -> (tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>)
  %dq, %dk, %dv = flash.attention_grad %q, %k, %v, %o, %lse, %do window = [-1, 64] softcap = 5.0
      : (tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x6x96xf32>, tensor<?x6x?xf32>, tensor<?x?x6x96xf32>)
      -> (tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>)
  return %dq, %dk, %dv : tensor<?x?x6x96xf32>, tensor<?x?x3x96xf32>, tensor<?x?x3x96xf32>
}

flash.kernel @fwd_window fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, window, softcap}

// CHECK-LABEL: func.func @launch
func.func @launch(%q: tensor<?x?x8x128xbf16>, %k: tensor<?x?x2x128xbf16>, %v: tensor<?x?x2x128xbf16>)
    -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>) {
  // CHECK: flash.launch @fwd_window(%{{.*}}, %{{.*}}, %{{.*}}) window = [128, 128] softcap = 5.000000e+01 softmax_scale = 1.000000e+00 : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>) -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
  %o, %lse = flash.launch @fwd_window(%q, %k, %v) window = [128, 128] softcap = 50.0 softmax_scale = 1.0
      : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>) -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
  return %o, %lse : tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>
}
