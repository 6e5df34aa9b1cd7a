// A plain fp16 head_dim 64 forward (64 positions: the prefill kernel, not the decode one).
func.func @forward(%q: tensor<1x64x2x64xf16>) -> tensor<1x64x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q
      : (tensor<1x64x2x64xf16>, tensor<1x64x2x64xf16>, tensor<1x64x2x64xf16>) -> (tensor<1x64x2x64xf16>, tensor<1x2x64xf32>)
  return %o : tensor<1x64x2x64xf16>
}
