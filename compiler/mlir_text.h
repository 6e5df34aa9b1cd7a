// The MLIR form of flashgen kernels (`flash.kernel` ops of the dialect in
// dialect/), written in plain C++ so that `flashgen dump --emit mlir` needs no
// MLIR. flashgen-opt prints kernel ops through these same functions, so the
// text is identical by construction; tests/lit checks that it parses back.
#pragma once

#include <string>
#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

// What follows the symbol name of a flash.kernel:
// fwd for sm_80 {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, warps = 4, stages = 2, causal}
std::string mlir_kernel_body(const KernelSpec& spec);

// flash.kernel @<uri> <body>
std::string mlir_kernel(const KernelSpec& spec);

// A module declaring each kernel (e.g. every pass of a forward+backward variant),
// byte for byte what `flashgen-opt` prints for it (MlirOptMain ends the output
// with an empty line):
// module {
//   flash.kernel @fwd_... fwd for sm_80 {...}
// }
// <empty line>
std::string mlir_module(const std::vector<KernelSpec>& specs);

}  // namespace flashgen
