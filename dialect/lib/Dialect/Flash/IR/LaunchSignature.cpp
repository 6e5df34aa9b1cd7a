#include "flashgen/Dialect/Flash/IR/LaunchSignature.h"

namespace mlir::flash {

LaunchSignature launchSignature(const flashgen::KernelSpec& spec) {
  using R = TensorRole;
  // Without `deterministic`, dq is accumulated in f32 with atomics by bwd_dkdv:
  // bwd_preprocess zeroes the accumulator and bwd_dq_convert casts it.
  const bool accumulates = !spec.deterministic;
  LaunchSignature s;
  switch (spec.pass) {
    case flashgen::Pass::fwd:
      s.operands = {R::query, R::key, R::value};
      s.results = {R::out, R::lse};
      break;
    case flashgen::Pass::bwd_preprocess:
      s.operands = {R::out, R::grad_out};
      s.results = {R::delta};
      if (accumulates) s.results.push_back(R::grad_query_accum);
      break;
    case flashgen::Pass::bwd_dkdv:
      s.operands = {R::query, R::key, R::value, R::grad_out, R::lse, R::delta};
      s.results = {R::grad_key, R::grad_value};
      if (accumulates) {
        s.operands.push_back(R::grad_query_accum);
        s.results.push_back(R::grad_query_accum);
      }
      break;
    case flashgen::Pass::bwd_dq:
      s.operands = {R::query, R::key, R::value, R::grad_out, R::lse, R::delta};
      s.results = {R::grad_query};
      break;
    case flashgen::Pass::bwd_dq_convert:
      s.operands = {R::grad_query_accum};
      s.results = {R::grad_query};
      break;
    // Decode: the split-KV kernel writes o and lse (one split) or the splits' parts (the
    // launch's workspace, sized at run time from the SM count), which fwd_combine merges.
    case flashgen::Pass::fwd_splitkv:
      s.operands = {R::query, R::key, R::value};
      s.results = {R::out, R::lse};
      break;
    case flashgen::Pass::fwd_combine:
      s.operands = {R::out, R::lse};
      s.results = {R::out, R::lse};
      break;
    // The new rows of k and v in, the caches (written in place at each sequence's length) out;
    // the positions, pages and rotary tables are launch parameters.
    case flashgen::Pass::kv_append:
      s.operands = {R::key, R::value};
      s.results = {R::key, R::value};
      break;
  }
  return s;
}

const char* roleName(TensorRole role) {
  switch (role) {
    case TensorRole::query: return "q";
    case TensorRole::key: return "k";
    case TensorRole::value: return "v";
    case TensorRole::out: return "o";
    case TensorRole::lse: return "lse";
    case TensorRole::grad_out: return "dO";
    case TensorRole::grad_query: return "dq";
    case TensorRole::grad_key: return "dk";
    case TensorRole::grad_value: return "dv";
    case TensorRole::delta: return "D";
    case TensorRole::grad_query_accum: return "dq_accum";
  }
  return "?";
}

bool isRowRole(TensorRole role) { return role == TensorRole::lse || role == TensorRole::delta; }

bool isFloat32Role(TensorRole role) { return isRowRole(role) || role == TensorRole::grad_query_accum; }

}  // namespace mlir::flash
