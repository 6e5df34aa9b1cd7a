// Ops of the `flash` dialect. Verifiers and parsers live in lib/Dialect/Flash/IR.
#ifndef FLASHGEN_FLASH_OPS_TD
#define FLASHGEN_FLASH_OPS_TD

include "flashgen/Dialect/Flash/IR/FlashDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Types and attributes shared by the ops.
//===----------------------------------------------------------------------===//

def Flash_Element : AnyTypeOf<[F16, BF16, F32]>;
// (batch, seqlen, heads, head_dim)
def Flash_Tensor : TensorRankOf<[F16, BF16, F32], [4]>;
// lse and D: (batch, heads_q, seqlen_q), fp32
def Flash_RowTensor : TensorRankOf<[F32], [3]>;

// The options shared by flash.attention and flash.attention_grad.
defvar Flash_ProblemAttrs = (ins
  UnitAttr:$causal,
  OptionalAttr<DenseI64ArrayAttr>:$window,
  OptionalAttr<F32Attr>:$softcap,
  OptionalAttr<F32Attr>:$softmax_scale,
  UnitAttr:$deterministic
);
defvar Flash_ProblemAttrsFormat = [{
  (`causal` $causal^)?
  (`window` `=` $window^)?
  (`softcap` `=` $softcap^)?
  (`softmax_scale` `=` $softmax_scale^)?
  (`deterministic` $deterministic^)?
}];
defvar Flash_ProblemAttrsDoc = [{
    Attributes:
    - `causal`: query i sees keys j <= i + seqlen_k - seqlen_q (bottom-right
      alignment when the lengths differ).
    - `window = [left, right]`: query i sees keys j with
      i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right;
      -1 leaves that side unbounded.
    - `softcap = c`: logits become c * tanh(s / c); c > 0.
    - `softmax_scale = s`: absent means 1/sqrt(head_dim); s > 0.
    - `deterministic`: gradients bitwise reproducible (no atomics).

    A query row that sees no key yields o = 0, lse = -inf and zero gradients.
}];

//===----------------------------------------------------------------------===//
// Problem level
//===----------------------------------------------------------------------===//

def Flash_AttentionOp : Flash_Op<"attention", [Pure]> {
  let summary = "exact attention forward: (q, k, v) -> (o, lse)";
  let description = !strconcat([{
    Computes o = softmax(q kᵀ · scale) v per (batch, head) and the
    log-sum-exp of each query row, without materialising the scores.
    q is (batch, seqlen_q, heads_q, head_dim); k and v are
    (batch, seqlen_k, heads_kv, head_dim) with heads_q a multiple of heads_kv
    (multi- and grouped-query attention); o is shaped like q and lse is f32
    (batch, heads_q, seqlen_q). Batch and sequence lengths may be dynamic;
    head_dim is static.

    ```mlir
    %o, %lse = flash.attention %q, %k, %v causal window = [256, 0]
        : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>)
        -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
    ```

  }], Flash_ProblemAttrsDoc);
  let arguments = !con((ins Flash_Tensor:$query, Flash_Tensor:$key, Flash_Tensor:$value),
                       Flash_ProblemAttrs);
  let results = (outs Flash_Tensor:$out, Flash_RowTensor:$lse);
  let assemblyFormat = !strconcat("$query `,` $key `,` $value ", Flash_ProblemAttrsFormat,
                                  " attr-dict `:` functional-type(operands, results)");
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def Flash_AttentionGradOp : Flash_Op<"attention_grad", [Pure]> {
  let summary = "exact attention backward: (q, k, v, o, lse, dO) -> (dq, dk, dv)";
  let description = !strconcat([{
    The gradients of `flash.attention` with respect to q, k and v, given the
    forward's o and lse and the gradient dO of o. P is recomputed tile by tile
    from q, k and lse. Gradients have the input element type; dk and dv of a
    shared key/value head are summed over its query heads.

    ```mlir
    %dq, %dk, %dv = flash.attention_grad %q, %k, %v, %o, %lse, %do causal
        : (tensor<2x100x8x64xf16>, tensor<2x100x8x64xf16>, tensor<2x100x8x64xf16>,
           tensor<2x100x8x64xf16>, tensor<2x8x100xf32>, tensor<2x100x8x64xf16>)
        -> (tensor<2x100x8x64xf16>, tensor<2x100x8x64xf16>, tensor<2x100x8x64xf16>)
    ```

  }], Flash_ProblemAttrsDoc);
  let arguments = !con((ins Flash_Tensor:$query, Flash_Tensor:$key, Flash_Tensor:$value,
                            Flash_Tensor:$out, Flash_RowTensor:$lse, Flash_Tensor:$grad_out),
                       Flash_ProblemAttrs);
  let results = (outs Flash_Tensor:$grad_query, Flash_Tensor:$grad_key, Flash_Tensor:$grad_value);
  let assemblyFormat = !strconcat("$query `,` $key `,` $value `,` $out `,` $lse `,` $grad_out ",
                                  Flash_ProblemAttrsFormat, " attr-dict `:` functional-type(operands, results)");
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Kernel level
//===----------------------------------------------------------------------===//

def Flash_KernelOp : Flash_Op<"kernel", [Symbol]> {
  let summary = "one generated kernel: its attributes are exactly a flashgen KernelSpec";
  let description = [{
    A symbol naming one kernel flashgen generates. The attributes are the
    fields of `flashgen::KernelSpec`, under the names of its field table
    (compiler/spec_fields.h, which every form of a spec comes from): the
    pass and the target architecture (written before and after `for`,
    stored as their names), head_dim, the element type (a type), the tile
    (block_m query rows × block_n key rows), warps, pipeline stages (32-bit
    integers), and the flags that change the code (causal, window, softcap,
    deterministic: unit attributes, present when set). Values that do not
    change the code (sequence lengths, window sizes, the cap, the scale) are
    launch parameters and live on `flash.launch`.

    The verifier checks each attribute's kind, then `KernelSpec::problems()`:
    the same rules the runtime and `flashgen dump` apply, each reported at
    the op.

    ```mlir
    flash.kernel @fwd_d128_bf16_m128n64_w4s2_causal_sm_80 fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal}
    ```
  }];
  // The spec's attributes are not declared here: spec_fields.h is their one declaration.
  let arguments = (ins SymbolNameAttr:$sym_name);
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "const ::flashgen::KernelSpec &":$spec)>
  ];
  let extraClassDeclaration = [{
    // The spec these attributes spell.
    ::flashgen::KernelSpec getSpec();
    // The element type of the kernel's tensors (the dtype attribute).
    ::mlir::Type getElementType();
  }];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Flash_LaunchOp : Flash_Op<"launch", [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a flash.kernel on tensors";
  let description = [{
    Binds tensors to the operands of a `flash.kernel` and carries the launch
    parameters that do not change the kernel's code: `window = [left, right]`
    (required exactly when the kernel has `window`), `softcap = c` (exactly
    when the kernel has `softcap`) and `softmax_scale` (absent means
    1/sqrt(head_dim)).

    Operands and results follow the kernel's pass:

    | pass | operands | results |
    | --- | --- | --- |
    | fwd | q, k, v | o, lse |
    | bwd_preprocess | o, dO | D (+ dq_accum unless deterministic) |
    | bwd_dkdv | q, k, v, dO, lse, D (+ dq_accum unless deterministic) | dk, dv (+ dq_accum unless deterministic) |
    | bwd_dq | q, k, v, dO, lse, D | dq |
    | bwd_dq_convert | dq_accum | dq |
    | fwd_splitkv | q, k, v | o, lse (decode; with split keys the parts are launch workspace) |
    | fwd_combine | o, lse | o, lse (the parts merged; a no-op launch with one split) |
    | kv_append | k, v (the new rows) | k, v (the caches they are written into) |

    q, k, v, o, dO, dq, dk, dv have the kernel's element type and head_dim;
    lse and D are f32 (batch, heads_q, seqlen_q); dq_accum is f32
    (batch, seqlen_q, heads_q, head_dim).

    ```mlir
    %o, %lse = flash.launch @fwd_d128_bf16_m128n64_w4s2_sm_80(%q, %k, %v)
        : (tensor<?x?x8x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x128xbf16>)
        -> (tensor<?x?x8x128xbf16>, tensor<?x8x?xf32>)
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$kernel,
    Variadic<AnyRankedTensor>:$args,
    OptionalAttr<DenseI64ArrayAttr>:$window,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<F32Attr>:$softmax_scale
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $kernel `(` $args `)`
    (`window` `=` $window^)?
    (`softcap` `=` $softcap^)?
    (`softmax_scale` `=` $softmax_scale^)?
    attr-dict `:` functional-type($args, results)
  }];
  let hasVerifier = 1;
}

#endif
