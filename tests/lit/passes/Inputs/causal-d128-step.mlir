// A causal bf16 head_dim 128 forward and backward, batch 1, one head, any length.
func.func @step(%q: tensor<1x?x1x128xbf16>, %do: tensor<1x?x1x128xbf16>)
    -> (tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>) {
  %o, %lse = flash.attention %q, %q, %q causal
      : (tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>) -> (tensor<1x?x1x128xbf16>, tensor<1x1x?xf32>)
  %dq, %dk, %dv = flash.attention_grad %q, %q, %q, %o, %lse, %do causal
      : (tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x1x?xf32>, tensor<1x?x1x128xbf16>)
      -> (tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>)
  return %dq, %dk, %dv : tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>, tensor<1x?x1x128xbf16>
}
