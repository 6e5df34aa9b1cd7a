// Mask rewrites that admit exactly the same (query, key) pairs. With
// d = seqlen_k - seqlen_q, query i sees keys i + d - left <= j <= i + d + right.
// RUN: flashgen-opt %s --canonicalize --split-input-file | FileCheck %s

// left >= seqlen_k - 1 and right >= seqlen_q - 1 exclude nothing: no window.
// CHECK-LABEL: func.func @covers_every_key
// CHECK: flash.attention %{{.*}}, %{{.*}}, %{{.*}} : (
func.func @covers_every_key(%q: tensor<1x10x2x64xf16>, %k: tensor<1x7x2x64xf16>) -> tensor<1x10x2x64xf16> {
  %o, %lse = flash.attention %q, %k, %k window = [6, 9]
      : (tensor<1x10x2x64xf16>, tensor<1x7x2x64xf16>, tensor<1x7x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x2x10xf32>)
  return %o : tensor<1x10x2x64xf16>
}

// -----

// One short of covering: left = 5 can exclude key 0 for the last query.
// CHECK-LABEL: func.func @left_one_short
// CHECK: window = [5, -1]
func.func @left_one_short(%q: tensor<1x10x2x64xf16>, %k: tensor<1x7x2x64xf16>) -> tensor<1x10x2x64xf16> {
  %o, %lse = flash.attention %q, %k, %k window = [5, 9]
      : (tensor<1x10x2x64xf16>, tensor<1x7x2x64xf16>, tensor<1x7x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x2x10xf32>)
  return %o : tensor<1x10x2x64xf16>
}

// -----

// right = 8 < seqlen_q - 1 = 9: query 0 does not see the last key.
// CHECK-LABEL: func.func @right_one_short
// CHECK: window = [-1, 8]
func.func @right_one_short(%q: tensor<1x10x2x64xf16>, %k: tensor<1x7x2x64xf16>) -> tensor<1x10x2x64xf16> {
  %o, %lse = flash.attention %q, %k, %k window = [100, 8]
      : (tensor<1x10x2x64xf16>, tensor<1x7x2x64xf16>, tensor<1x7x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x2x10xf32>)
  return %o : tensor<1x10x2x64xf16>
}

// -----

// Dynamic sequence lengths: nothing is provable, nothing changes.
// CHECK-LABEL: func.func @dynamic
// CHECK: window = [100000, 100000]
func.func @dynamic(%q: tensor<?x?x2x64xf16>) -> tensor<?x?x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q window = [100000, 100000]
      : (tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>) -> (tensor<?x?x2x64xf16>, tensor<?x2x?xf32>)
  return %o : tensor<?x?x2x64xf16>
}

// -----

// Under causal, j <= i + d is tighter than any right >= 0.
// CHECK-LABEL: func.func @causal_right
// CHECK: causal window = [128, -1]
func.func @causal_right(%q: tensor<?x?x2x64xf16>) -> tensor<?x?x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q causal window = [128, 0]
      : (tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>) -> (tensor<?x?x2x64xf16>, tensor<?x2x?xf32>)
  return %o : tensor<?x?x2x64xf16>
}

// -----

// [-1, 0] is the causal mask itself.
// CHECK-LABEL: func.func @window_is_causal
// CHECK: flash.attention %{{.*}}, %{{.*}}, %{{.*}} causal softcap = 2.000000e+00 :
func.func @window_is_causal(%q: tensor<?x?x2x64xf16>) -> tensor<?x?x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q window = [-1, 0] softcap = 2.0
      : (tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>) -> (tensor<?x?x2x64xf16>, tensor<?x2x?xf32>)
  return %o : tensor<?x?x2x64xf16>
}

// -----

// [-1, -1] bounds nothing.
// CHECK-LABEL: func.func @unbounded
// CHECK: flash.attention %{{.*}}, %{{.*}}, %{{.*}} deterministic :
func.func @unbounded(%q: tensor<?x?x2x64xf16>) -> tensor<?x?x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q window = [-1, -1] deterministic
      : (tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>) -> (tensor<?x?x2x64xf16>, tensor<?x2x?xf32>)
  return %o : tensor<?x?x2x64xf16>
}

// -----

// A window that cuts on both sides stays, and so does [L, 0] without causal.
// CHECK-LABEL: func.func @kept
// CHECK: window = [3, 2]
// CHECK: window = [3, 0]
func.func @kept(%q: tensor<1x10x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>) {
  %o, %lse = flash.attention %q, %q, %q window = [3, 2]
      : (tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x2x10xf32>)
  %o2, %lse2 = flash.attention %q, %q, %q window = [3, 0]
      : (tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>) -> (tensor<1x10x2x64xf16>, tensor<1x2x10xf32>)
  return %o, %o2 : tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>
}

// -----

// The same rules hold for the backward problem.
// CHECK-LABEL: func.func @grad
// CHECK: flash.attention_grad {{.*}} causal :
func.func @grad(%q: tensor<1x10x2x64xf16>, %lse: tensor<1x2x10xf32>) -> tensor<1x10x2x64xf16> {
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %q causal window = [9, 3]
      : (tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x2x10xf32>, tensor<1x10x2x64xf16>)
      -> (tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>, tensor<1x10x2x64xf16>)
  return %dq : tensor<1x10x2x64xf16>
}
