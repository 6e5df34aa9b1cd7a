// Passes of the `flash` dialect; each is implemented in its own file under
// lib/Dialect/Flash/Transforms.
#ifndef FLASHGEN_FLASH_PASSES_TD
#define FLASHGEN_FLASH_PASSES_TD

include "mlir/Pass/PassBase.td"

def FlashSelectKernels : Pass<"flash-select-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower flash.attention/attention_grad to flash.kernel + flash.launch";
  let description = [{
    Picks the kernels of each problem op with flashgen's own selection
    (`select_forward_kernels` / `select_backward_kernels`, the function the
    runtime calls: persisted autotune winners, else the heuristic table) for
    the target `arch`, declares one `flash.kernel` per distinct spec at the top
    of the module (named by the spec's URI) and replaces the problem op with
    the `flash.launch` chain that computes the same values. Dynamic sizes
    reach the selection as 0 (unknown). Problems with no kernel (fp32, a
    head_dim no kernel supports) are reported as "no kernel for ...".
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_80\"",
           "target architecture: sm_80, sm_86, sm_89, sm_90 or sm_90a">
  ];
  let dependentDialects = ["::mlir::flash::FlashDialect"];
}

def FlashEmitCuda : Pass<"flash-emit-cuda", "::mlir::ModuleOp"> {
  let summary = "Write the generated CUDA source (and cubin, PTX) of every flash.kernel";
  let description = [{
    For each `flash.kernel`, writes `<dir>/<uri>.cu` holding exactly the bytes
    of `flashgen::generate_source` for its spec: the source the runtime
    compiles for the same spec. With `cubin=true` (and `ptx=true`) it also
    compiles that source through NVRTC with the runtime's options for the
    kernel's arch and writes `<uri>.cubin` (and `<uri>.ptx`). The IR is left
    unchanged.
  }];
  let options = [
    Option<"dir", "dir", "std::string", /*default=*/"", "directory to write the files to (created if missing)">,
    Option<"cubin", "cubin", "bool", /*default=*/"false", "also compile each kernel with NVRTC and write <uri>.cubin">,
    Option<"ptx", "ptx", "bool", /*default=*/"false", "with cubin: also write the PTX NVRTC produced, <uri>.ptx">
  ];
}

#endif
