// A plain fp16 head_dim 64 forward.
func.func @forward(%q: tensor<1x16x2x64xf16>) -> tensor<1x16x2x64xf16> {
  %o, %lse = flash.attention %q, %q, %q
      : (tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>, tensor<1x16x2x64xf16>) -> (tensor<1x16x2x64xf16>, tensor<1x2x16xf32>)
  return %o : tensor<1x16x2x64xf16>
}
