// What a flash.launch of each kernel pass takes and returns. One table drives
// both the launch verifier and the --flash-select-kernels lowering, so the two
// cannot disagree about a kernel's operands.
#pragma once

#include "compiler/kernel_spec.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::flash {

enum class TensorRole {
  query,
  key,
  value,
  out,
  lse,
  grad_out,
  grad_query,
  grad_key,
  grad_value,
  delta,             // D = rowsum(dO * O), f32 (batch, heads_q, seqlen_q)
  grad_query_accum,  // f32 dq accumulator, shaped like q
};

struct LaunchSignature {
  llvm::SmallVector<TensorRole, 8> operands;
  llvm::SmallVector<TensorRole, 4> results;
};

LaunchSignature launchSignature(const flashgen::KernelSpec& spec);

// "q", "k", "lse", "dq_accum", ...: the names used in diagnostics and docs.
const char* roleName(TensorRole role);

// f32 (batch, heads_q, seqlen_q) rows rather than a (batch, seqlen, heads, head_dim) tensor.
bool isRowRole(TensorRole role);
// Accumulated in f32 whatever the kernel's element type.
bool isFloat32Role(TensorRole role);

}  // namespace mlir::flash
