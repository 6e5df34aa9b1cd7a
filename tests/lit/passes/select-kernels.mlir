// --flash-select-kernels: problem ops -> flash.kernel + flash.launch chains.
// Tile sizes are whatever flashgen's selection picks (select-kernels-same-as-runtime.test
// pins them to it); here the structure is checked.
// RUN: flashgen-opt %s --split-input-file --flash-select-kernels=arch=sm_90a | FileCheck %s
// The lowered IR verifies and round-trips.
// RUN: flashgen-opt %s --split-input-file --flash-select-kernels=arch=sm_90a | flashgen-opt --split-input-file | FileCheck %s

// CHECK: flash.kernel @[[FWD:fwd_d128_bf16_m[0-9]+n[0-9]+_w[0-9]+s[0-9]+_causal_window_softcap_sm_90a]] fwd for sm_90a {head_dim = 128, dtype = bf16, {{.*}}, causal, window, softcap}
// CHECK-NOT: flash.kernel
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[Q:.*]]: tensor<2x?x8x128xbf16>, %[[K:.*]]: tensor<2x?x2x128xbf16>, %[[V:.*]]: tensor<2x?x2x128xbf16>)
// CHECK: %[[R:.*]]:2 = flash.launch @[[FWD]](%[[Q]], %[[K]], %[[V]]) window = [256, -1] softcap = 3.000000e+01 softmax_scale = 1.250000e-01 : (tensor<2x?x8x128xbf16>, tensor<2x?x2x128xbf16>, tensor<2x?x2x128xbf16>) -> (tensor<2x?x8x128xbf16>, tensor<2x8x?xf32>)
// CHECK-NOT: flash.attention
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @forward(%q: tensor<2x?x8x128xbf16>, %k: tensor<2x?x2x128xbf16>, %v: tensor<2x?x2x128xbf16>)
    -> (tensor<2x?x8x128xbf16>, tensor<2x8x?xf32>) {
  %o, %lse = flash.attention %q, %k, %v causal window = [256, -1] softcap = 30.0 softmax_scale = 0.125
      : (tensor<2x?x8x128xbf16>, tensor<2x?x2x128xbf16>, tensor<2x?x2x128xbf16>) -> (tensor<2x?x8x128xbf16>, tensor<2x8x?xf32>)
  return %o, %lse : tensor<2x?x8x128xbf16>, tensor<2x8x?xf32>
}

// -----

// Backward, atomics path: D and the f32 dq accumulator flow from bwd_preprocess
// through bwd_dkdv to bwd_dq_convert.
// CHECK: flash.kernel @[[PRE:bwd_preprocess_d64_fp16_[a-z0-9_]+_sm_90a]] bwd_preprocess for sm_90a {head_dim = 64, dtype = f16,
// CHECK-NEXT: flash.kernel @[[DKDV:bwd_dkdv_d64_fp16_[a-z0-9_]+_sm_90a]] bwd_dkdv for sm_90a {head_dim = 64, dtype = f16,
// CHECK-NEXT: flash.kernel @[[CONV:bwd_dq_convert_d64_fp16_[a-z0-9_]+_sm_90a]] bwd_dq_convert for sm_90a {head_dim = 64, dtype = f16,
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}}, %[[O:[^:]*]]: {{[^,]*}}, %[[LSE:[^:]*]]: {{[^,]*}}, %[[DO:[^:]*]]: {{[^,]*}})
// CHECK: %[[P:.*]]:2 = flash.launch @[[PRE]](%[[O]], %[[DO]]) : (tensor<3x100x4x64xf16>, tensor<3x100x4x64xf16>) -> (tensor<3x4x100xf32>, tensor<3x100x4x64xf32>)
// CHECK: %[[G:.*]]:3 = flash.launch @[[DKDV]](%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[P]]#0, %[[P]]#1) : ({{.*}}) -> (tensor<3x37x1x64xf16>, tensor<3x37x1x64xf16>, tensor<3x100x4x64xf32>)
// CHECK: %[[DQ:.*]] = flash.launch @[[CONV]](%[[G]]#2) : (tensor<3x100x4x64xf32>) -> tensor<3x100x4x64xf16>
// CHECK: return %[[DQ]], %[[G]]#0, %[[G]]#1
func.func @backward(%q: tensor<3x100x4x64xf16>, %k: tensor<3x37x1x64xf16>, %v: tensor<3x37x1x64xf16>,
                    %o: tensor<3x100x4x64xf16>, %lse: tensor<3x4x100xf32>, %do: tensor<3x100x4x64xf16>)
    -> (tensor<3x100x4x64xf16>, tensor<3x37x1x64xf16>, tensor<3x37x1x64xf16>) {
  %dq, %dk, %dv = flash.attention_grad %q, %k, %v, %o, %lse, %do
      : (tensor<3x100x4x64xf16>, tensor<3x37x1x64xf16>, tensor<3x37x1x64xf16>, tensor<3x100x4x64xf16>, tensor<3x4x100xf32>, tensor<3x100x4x64xf16>)
      -> (tensor<3x100x4x64xf16>, tensor<3x37x1x64xf16>, tensor<3x37x1x64xf16>)
  return %dq, %dk, %dv : tensor<3x100x4x64xf16>, tensor<3x37x1x64xf16>, tensor<3x37x1x64xf16>
}

// -----

// Deterministic backward: no accumulator; bwd_dq computes dq from D.
// CHECK: flash.kernel @[[PRE:bwd_preprocess_[a-z0-9_]+_det_sm_90a]] bwd_preprocess
// CHECK-NEXT: flash.kernel @[[DKDV:bwd_dkdv_[a-z0-9_]+_det_sm_90a]] bwd_dkdv {{.*}}, deterministic}
// CHECK-NEXT: flash.kernel @[[DQK:bwd_dq_d[a-z0-9_]+_det_sm_90a]] bwd_dq {{.*}}, deterministic}
// CHECK-LABEL: func.func @deterministic
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}}, %[[O:[^:]*]]: {{[^,]*}}, %[[LSE:[^:]*]]: {{[^,]*}}, %[[DO:[^:]*]]: {{[^,]*}})
// CHECK: %[[D:.*]] = flash.launch @[[PRE]](%[[O]], %[[DO]]) window = [16, 16] : ({{.*}}) -> tensor<?x2x?xf32>
// CHECK: %[[G:.*]]:2 = flash.launch @[[DKDV]](%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[D]]) window = [16, 16] : (
// CHECK: %[[DQ:.*]] = flash.launch @[[DQK]](%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[D]]) window = [16, 16] : (
// CHECK: return %[[DQ]], %[[G]]#0, %[[G]]#1
func.func @deterministic(%q: tensor<?x?x2x96xbf16>, %k: tensor<?x?x2x96xbf16>, %v: tensor<?x?x2x96xbf16>,
                         %o: tensor<?x?x2x96xbf16>, %lse: tensor<?x2x?xf32>, %do: tensor<?x?x2x96xbf16>)
    -> (tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>) {
  %dq, %dk, %dv = flash.attention_grad %q, %k, %v, %o, %lse, %do window = [16, 16] deterministic
      : (tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x2x?xf32>, tensor<?x?x2x96xbf16>)
      -> (tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>)
  return %dq, %dk, %dv : tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>, tensor<?x?x2x96xbf16>
}

// -----

// Two problems that need the same kernel share one declaration; a forward and
// its backward in one function lower together.
// CHECK: flash.kernel @[[FWD:fwd_[a-z0-9_]+]] fwd
// CHECK-NEXT: flash.kernel @bwd_preprocess
// CHECK-NEXT: flash.kernel @bwd_dkdv
// CHECK-NEXT: flash.kernel @bwd_dq_convert
// CHECK-NOT: flash.kernel
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:2 = flash.launch @[[FWD]](
// CHECK: flash.launch @[[FWD]](
// CHECK: flash.launch @bwd_preprocess{{.*}}(%[[F]]#0,
// CHECK: flash.launch @bwd_dkdv{{.*}}, %[[F]]#1,
// CHECK: flash.launch @bwd_dq_convert
func.func @train_step(%q: tensor<1x?x1x64xbf16>, %do: tensor<1x?x1x64xbf16>)
    -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>) {
  %o, %lse = flash.attention %q, %q, %q
      : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>) -> (tensor<1x?x1x64xbf16>, tensor<1x1x?xf32>)
  %o2, %lse2 = flash.attention %do, %q, %q
      : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>) -> (tensor<1x?x1x64xbf16>, tensor<1x1x?xf32>)
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %o, %lse, %o2
      : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x1x?xf32>, tensor<1x?x1x64xbf16>)
      -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>)
  return %dq, %dk, %dv : tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>
}

// -----

// Decode (seqlen_q <= 16): the split-KV kernel, then the combine that merges its parts
// (a no-op launch when the keys are not split), o and lse threaded through both.
// CHECK: flash.kernel @[[SPLIT:fwd_splitkv_d128_bf16_m16n[0-9]+_w4s[0-9]+_sm_90a]] fwd_splitkv for sm_90a {head_dim = 128, dtype = bf16,
// CHECK-NEXT: flash.kernel @[[COMB:fwd_combine_d128_bf16_[a-z0-9_]+_sm_90a]] fwd_combine for sm_90a {head_dim = 128, dtype = bf16,
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}})
// CHECK: %[[S:.*]]:2 = flash.launch @[[SPLIT]](%[[Q]], %[[K]], %[[V]]) : (tensor<4x1x32x128xbf16>, tensor<4x8192x8x128xbf16>, tensor<4x8192x8x128xbf16>) -> (tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>)
// CHECK: %[[C:.*]]:2 = flash.launch @[[COMB]](%[[S]]#0, %[[S]]#1) : (tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>) -> (tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>)
// CHECK: return %[[C]]#0, %[[C]]#1
func.func @decode(%q: tensor<4x1x32x128xbf16>, %k: tensor<4x8192x8x128xbf16>, %v: tensor<4x8192x8x128xbf16>)
    -> (tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>) {
  %o, %lse = flash.attention %q, %k, %v
      : (tensor<4x1x32x128xbf16>, tensor<4x8192x8x128xbf16>, tensor<4x8192x8x128xbf16>) -> (tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>)
  return %o, %lse : tensor<4x1x32x128xbf16>, tensor<4x32x1xf32>
}
