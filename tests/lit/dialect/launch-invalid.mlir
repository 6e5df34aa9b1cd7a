// flash.launch verifiers: the kernel symbol, the operands and results of its
// pass (dialect/lib/Dialect/Flash/IR/LaunchSignature.cpp), launch parameters.
// RUN: flashgen-opt %s -split-input-file -verify-diagnostics

func.func @missing(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{'nowhere' does not name a flash.kernel}}
  %o, %lse = flash.launch @nowhere(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @not_a_kernel(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{'not_a_kernel' does not name a flash.kernel}}
  %o, %lse = flash.launch @not_a_kernel(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @operand_count(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd (fwd) takes 3 operands (q, k, v), got 2}}
  %o, %lse = flash.launch @fwd(%q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @result_count(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd (fwd) returns 2 results (o, lse), got 1}}
  %o = flash.launch @fwd(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> tensor<1x16x2x64xf16>
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @operand_dtype(%q: tensor<1x16x2x64xf16>, %k: tensor<1x16x2x64xbf16>) {
  // expected-error @+1 {{operand #1 (k) must be a tensor of 'f16' (batch, seqlen, heads, 64), got 'tensor<1x16x2x64xbf16>'}}
  %o, %lse = flash.launch @fwd(%q, %k, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xbf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @head_dim(%q: tensor<1x16x2x64xf16>, %v: tensor<1x16x2x?xf16>) {
  // expected-error @+1 {{operand #2 (v) must be a tensor of 'f16' (batch, seqlen, heads, 64), got 'tensor<1x16x2x?xf16>'}}
  %o, %lse = flash.launch @fwd(%q, %q, %v) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x?xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @lse(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{result #1 (lse) must be an f32 tensor (batch, heads_q, seqlen_q), got 'tensor<1x2x16xf16>'}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf16>)
  return
}

// -----

flash.kernel @pre bwd_preprocess for sm_80 {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 1}
func.func @accumulator(%o: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{result #1 (dq_accum) must be a tensor of 'f32' (batch, seqlen, heads, 64), got 'tensor<1x16x2x64xf16>'}}
  %d, %acc = flash.launch @pre(%o, %o) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x2x16xf32>, tensor<1x16x2x64xf16>)
  return
}

// -----

flash.kernel @pre bwd_preprocess for sm_80 {head_dim = 64, dtype = f16, block_m = 64, block_n = 64, warps = 4, stages = 1, deterministic}
func.func @deterministic_has_no_accumulator(%o: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @pre (bwd_preprocess) returns 1 result (D), got 2}}
  %d, %acc = flash.launch @pre(%o, %o) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x2x16xf32>, tensor<1x16x2x64xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2, window}
func.func @window_missing(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd has `window`: the launch must give window = [left, right]}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @window_extra(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd has no `window`: the launch must not give window = [left, right]}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) window = [4, 4] : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2, softcap}
func.func @softcap_missing(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd has `softcap`: the launch must give softcap = <cap>}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2}
func.func @softcap_extra(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{kernel @fwd has no `softcap`: the launch must not give softcap = <cap>}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) softcap = 2.0 : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}

// -----

flash.kernel @fwd fwd for sm_80 {head_dim = 64, dtype = f16, block_m = 128, block_n = 64, warps = 4, stages = 2, softcap}
func.func @softcap_value(%q: tensor<1x16x2x64xf16>) {
  // expected-error @+1 {{softcap must be a positive finite number (absent: no soft-capping), got -1}}
  %o, %lse = flash.launch @fwd(%q, %q, %q) softcap = -1.0 : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return
}
