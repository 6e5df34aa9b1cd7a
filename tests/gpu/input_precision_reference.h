// "pt" in FlashAttention's test rule: standard attention computed in the input
// precision, i.e. with the intermediates a framework would hold in fp16/bf16
// (P, dP, dS and the outputs) rounded to the input dtype; products accumulate in fp32.
// Its error against the fp64 oracle sets the tolerance of the generated kernels.
#pragma once

#include <vector>

#include "runtime/validate.h"

namespace flashgen::test {

// Contiguous (batch, seqlen, heads, head_dim) tensors; lse (batch, heads_q, seqlen_q).
struct PtResult {
  std::vector<float> o, lse, dq, dk, dv;
};

// Inputs hold values already representable in p.dtype. `threads` CPU threads.
PtResult input_precision_attention(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const std::vector<float>& dout, int threads);

float round_to(DType t, float x);

}  // namespace flashgen::test
