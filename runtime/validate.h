// Argument validation for every entry point. Runs before any work; throws
// Error(invalid_argument / unsupported) naming the argument, its value and what was expected.
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// The problem's geometry and its options with defaults resolved.
struct Problem {
  std::int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  DType dtype = DType::f32;
  int device = kCpu;
  AttentionOptions options;  // softmax_scale resolved; window_right = 0 when causal (and no tighter)
  bool has_lse = true;
};

Problem validate_forward(const ForwardArgs& args);
Problem validate_backward(const BackwardArgs& args);

}  // namespace flashgen
