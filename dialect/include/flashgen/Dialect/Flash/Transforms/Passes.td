// Passes of the `flash` dialect; each is implemented in its own file under
// lib/Dialect/Flash/Transforms.
#ifndef FLASHGEN_FLASH_PASSES_TD
#define FLASHGEN_FLASH_PASSES_TD

include "mlir/Pass/PassBase.td"

def FlashSelectKernels : Pass<"flash-select-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower flash.attention/attention_grad to flash.kernel + flash.launch";
  let description = [{
    Picks the kernels of each problem op for the target `arch` with flashgen's
    one selection rule, the code the runtime runs (`select_kernels` in
    runtime/autotune_selection.h): the autotune winner persisted for the
    problem's tuning key, else the heuristic table. Winners are read from
    `<tuning-dir>/autotune.json` (what `flashgen tune` and `Runtime::tune`
    write into the cache directory) for one device of the file: the one
    `device` names (its GPU name, e.g. "NVIDIA H200", or its full key), else
    the sole device tuned by this flashgen and NVRTC that holds winners for
    `arch` (several: an error asking for `device`). A winner is used only
    while its candidate set is today's, as in the runtime. Without
    `tuning-dir` the heuristic table alone decides.

    Declares one `flash.kernel` per distinct spec at the top of the module
    (named by the spec's URI) and replaces the problem op with the
    `flash.launch` chain that computes the same values. Dynamic sizes reach
    the selection as 0 (unknown). Problems with no kernel (fp32, a head_dim no
    kernel supports) are reported as "no kernel for ...".
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_80\"",
           "target architecture: sm_80, sm_86, sm_89, sm_90 or sm_90a">,
    Option<"tuningDir", "tuning-dir", "std::string", /*default=*/"",
           "directory holding autotune.json (the runtime's cache directory); empty: the heuristic table">,
    Option<"device", "device", "std::string", /*default=*/"",
           "the device of autotune.json whose winners to use: its GPU name or key; empty: the sole one for arch">
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
