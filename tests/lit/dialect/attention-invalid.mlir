// flash.attention / flash.attention_grad verifiers: one error per split.
// RUN: flashgen-opt %s -split-input-file -verify-diagnostics

func.func @element_types(%q: tensor<1x16x2x64xf16>, %k: tensor<1x16x2x64xbf16>) {
  // expected-error @+1 {{key element type 'bf16' differs from query element type 'f16'}}
  %o, %lse = flash.attention %q, %k, %k : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xbf16>, tensor<1x16x2x64xbf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @value_element_type(%q: tensor<1x16x2x64xf16>, %v: tensor<1x16x2x64xf32>) {
  // expected-error @+1 {{value element type 'f32' differs from query element type 'f16'}}
  %o, %lse = flash.attention %q, %q, %v : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf32>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @dynamic_head_dim(%q: tensor<1x16x2x?xf16>) {
  // expected-error @+1 {{head_dim of query must be static}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x?xf16>, tensor<1x16x2x?xf16>, tensor<1x16x2x?xf16>) -> (tensor<1x16x2x?xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @head_dims(%q: tensor<1x16x2x64xf16>, %k: tensor<1x16x2x128xf16>) {
  // expected-error @+1 {{head_dim of key (128) differs from query (64)}}
  %o, %lse = flash.attention %q, %k, %k : (tensor<1x16x2x64xf16>, tensor<1x16x2x128xf16>, tensor<1x16x2x128xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @value_head_dim(%q: tensor<1x16x2x64xf16>, %v: tensor<1x16x2x32xf16>) {
  // expected-error @+1 {{head_dim of value (32) differs from query (64)}}
  %o, %lse = flash.attention %q, %q, %v : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x32xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @batch(%q: tensor<2x16x2x64xf16>, %k: tensor<3x16x2x64xf16>) {
  // expected-error @+1 {{batch of key (3) differs from query (2)}}
  %o, %lse = flash.attention %q, %k, %k : (tensor<2x16x2x64xf16>, tensor<3x16x2x64xf16>, tensor<3x16x2x64xf16>) -> (tensor<2x16x2x64xf16>, tensor<2x2x16xf32>)
  return
}

// -----

func.func @seqlen_kv(%q: tensor<1x16x2x64xf16>, %k: tensor<1x20x2x64xf16>, %v: tensor<1x21x2x64xf16>) {
  // expected-error @+1 {{seqlen of value (21) differs from key (20)}}
  %o, %lse = flash.attention %q, %k, %v : (tensor<1x16x2x64xf16>, tensor<1x20x2x64xf16>, tensor<1x21x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @heads_kv(%q: tensor<1x16x4x64xf16>, %k: tensor<1x16x2x64xf16>, %v: tensor<1x16x1x64xf16>) {
  // expected-error @+1 {{heads of value (1) differs from key (2)}}
  %o, %lse = flash.attention %q, %k, %v : (tensor<1x16x4x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x1x64xf16>) -> (tensor<1x16x4x64xf16>, tensor<1x4x16xf32>)
  return
}

// -----

func.func @gqa(%q: tensor<1x16x8x64xf16>, %k: tensor<1x16x3x64xf16>) {
  // expected-error @+1 {{heads of query (8) must be a multiple of heads of key and value (3)}}
  %o, %lse = flash.attention %q, %k, %k : (tensor<1x16x8x64xf16>, tensor<1x16x3x64xf16>, tensor<1x16x3x64xf16>) -> (tensor<1x16x8x64xf16>, tensor<1x8x16xf32>)
  return
}

// -----

func.func @out_type(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{out must be shaped and typed like query ('tensor<1x16x2x64xf16>'), got 'tensor<1x17x2x64xf16>'}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x17x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @out_element(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{out must be shaped and typed like query}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xbf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @lse_shape(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{lse must be f32 (batch, heads_q, seqlen_q) = (1, 2, 16), got 'tensor<1x16x2xf32>'}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x16x2xf32>)
  return
}

// -----

func.func @lse_dynamic(%q: tensor<?x?x2x64xf16>) {
  // expected-error @+1 {{lse must be f32 (batch, heads_q, seqlen_q) = (?, 2, ?), got 'tensor<?x3x?xf32>'}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>, tensor<?x?x2x64xf16>) -> (tensor<?x?x2x64xf16>, tensor<?x3x?xf32>)
  return
}

// -----

func.func @lse_element(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{result #1 must be 3D tensor of 32-bit float values}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf16>)
  return
}

// -----

func.func @rank(%q: tensor<16x2x64xf16>) {
  // expected-error @+1 {{operand #0 must be 4D tensor of 16-bit float or bfloat16 type or 32-bit float values}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<16x2x64xf16>, tensor<16x2x64xf16>, tensor<16x2x64xf16>) -> (tensor<16x2x64xf16>, tensor<2x16xf32>)
  return
}

// -----

func.func @element(%q: tensor<1x16x2x64xi8>) {
  // expected-error @+1 {{operand #0 must be 4D tensor of 16-bit float or bfloat16 type or 32-bit float values}}
  %o, %lse = flash.attention %q, %q, %q : (tensor<1x16x2x64xi8>, tensor<1x16x2x64xi8>, tensor<1x16x2x64xi8>) -> (tensor<1x16x2x64xi8>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @window_size(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{window must be [left, right], got 3 values}}
  %o, %lse = flash.attention %q, %q, %q window = [1, 2, 3] : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @window_left(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{window left must be >= 0, or -1 for unbounded, got -2}}
  %o, %lse = flash.attention %q, %q, %q window = [-2, 0] : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @window_right(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{window right must be >= 0, or -1 for unbounded, got -7}}
  %o, %lse = flash.attention %q, %q, %q window = [4, -7] : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @softcap(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{softcap must be a positive finite number (absent: no soft-capping), got 0}}
  %o, %lse = flash.attention %q, %q, %q softcap = 0.0 : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @softmax_scale(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{softmax_scale must be a positive finite number (absent: 1/sqrt(head_dim)), got -0.5}}
  %o, %lse = flash.attention %q, %q, %q softmax_scale = -0.5 : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @softmax_scale_inf(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{softmax_scale must be a positive finite number (absent: 1/sqrt(head_dim)), got inf}}
  %o, %lse = flash.attention %q, %q, %q softmax_scale = 0x7F800000 : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @grad_gqa(%q: tensor<1x16x4x64xf16>, %k: tensor<1x16x3x64xf16>, %lse: tensor<1x4x16xf32>) {
  // expected-error @+1 {{heads of query (4) must be a multiple of heads of key and value (3)}}
  %dq, %dk, %dv = flash.attention_grad %q, %k, %k, %q, %lse, %q : (tensor<1x16x4x64xf16>, tensor<1x16x3x64xf16>, tensor<1x16x3x64xf16>, tensor<1x16x4x64xf16>, tensor<1x4x16xf32>, tensor<1x16x4x64xf16>) -> (tensor<1x16x4x64xf16>, tensor<1x16x3x64xf16>, tensor<1x16x3x64xf16>)
  return
}

// -----

func.func @grad_out_operand(%q: tensor<1x16x2x64xf16>, %o: tensor<1x16x2x32xf16>, %lse: tensor<1x2x16xf32>) {
  // expected-error @+1 {{out must be shaped and typed like query}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %o, %lse, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x32xf16>, tensor<1x2x16xf32>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>)
  return
}

// -----

func.func @grad_lse(%q: tensor<1x16x2x64xf16>, %lse: tensor<1x2x15xf32>) {
  // expected-error @+1 {{lse must be f32 (batch, heads_q, seqlen_q) = (1, 2, 16), got 'tensor<1x2x15xf32>'}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x2x15xf32>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>)
  return
}

// -----

func.func @grad_dout(%q: tensor<1x16x2x64xf16>, %do: tensor<1x16x2x64xbf16>, %lse: tensor<1x2x16xf32>) {
  // expected-error @+1 {{grad_out must be shaped and typed like query}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %do : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x2x16xf32>, tensor<1x16x2x64xbf16>) -> (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>)
  return
}

// -----

func.func @grad_query(%q: tensor<1x16x2x64xf16>, %lse: tensor<1x2x16xf32>) {
  // expected-error @+1 {{grad_query must be shaped and typed like query ('tensor<1x16x2x64xf16>'), got 'tensor<1x16x2x64xf32>'}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %q : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x2x16xf32>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf32>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>)
  return
}

// -----

func.func @grad_key(%q: tensor<1x16x4x64xf16>, %k: tensor<1x9x2x64xf16>, %lse: tensor<1x4x16xf32>) {
  // expected-error @+1 {{grad_key must be shaped and typed like key ('tensor<1x9x2x64xf16>'), got 'tensor<1x9x4x64xf16>'}}
  %dq, %dk, %dv = flash.attention_grad %q, %k, %k, %q, %lse, %q : (tensor<1x16x4x64xf16>, tensor<1x9x2x64xf16>, tensor<1x9x2x64xf16>, tensor<1x16x4x64xf16>, tensor<1x4x16xf32>, tensor<1x16x4x64xf16>) -> (tensor<1x16x4x64xf16>, tensor<1x9x4x64xf16>, tensor<1x9x2x64xf16>)
  return
}

// -----

func.func @grad_value(%q: tensor<1x16x4x64xf16>, %k: tensor<1x9x2x64xf16>, %lse: tensor<1x4x16xf32>) {
  // expected-error @+1 {{grad_value must be shaped and typed like value ('tensor<1x9x2x64xf16>'), got 'tensor<1x8x2x64xf16>'}}
  %dq, %dk, %dv = flash.attention_grad %q, %k, %k, %q, %lse, %q : (tensor<1x16x4x64xf16>, tensor<1x9x2x64xf16>, tensor<1x9x2x64xf16>, tensor<1x16x4x64xf16>, tensor<1x4x16xf32>, tensor<1x16x4x64xf16>) -> (tensor<1x16x4x64xf16>, tensor<1x9x2x64xf16>, tensor<1x8x2x64xf16>)
  return
}

// -----

func.func @grad_window(%q: tensor<1x16x2x64xf16>, %lse: tensor<1x2x16xf32>) {
  // expected-error @+1 {{window must be [left, right], got 1 value}}
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %q, %lse, %q window = [3] : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x2x16xf32>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>)
  return
}
