// The `flash` dialect: exact attention (FlashAttention forward and backward)
// as problems (what to compute) and kernels (how flashgen generates it).
#ifndef FLASHGEN_FLASH_DIALECT_TD
#define FLASHGEN_FLASH_DIALECT_TD

include "mlir/IR/OpBase.td"

def Flash_Dialect : Dialect {
  let name = "flash";
  let cppNamespace = "::mlir::flash";
  let summary = "Exact attention problems and the flashgen kernels that compute them.";
  let description = [{
    Two levels. Problem ops (`flash.attention`, `flash.attention_grad`) say what
    to compute on tensors laid out as (batch, seqlen, heads, head_dim).
    Kernel ops (`flash.kernel`) are symbols whose attributes are exactly a
    flashgen `KernelSpec`; `flash.launch` binds tensors to one of them.
    `--flash-select-kernels` lowers the first level to the second with the
    runtime's own kernel selection, and `--flash-emit-cuda` writes each
    kernel's generated CUDA source.
  }];
}

class Flash_Op<string mnemonic, list<Trait> traits = []> : Op<Flash_Dialect, mnemonic, traits>;

#endif
