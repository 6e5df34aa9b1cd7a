// Which kernels run a problem: the heuristic table (and, once autotuning lands,
// persisted winners). Shared by the runtime and the MLIR `--flash-select-kernels`
// pass, so both pick the same specs for the same problem.
#pragma once

#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

// What selection looks at: the code-changing options plus the sizes that steer tiling.
struct ProblemKey : ProblemOptions {
  long long batch = 1;
  long long heads_q = 1;
  long long heads_kv = 1;
  long long seqlen_q = 0;
  long long seqlen_k = 0;
  bool seqused_k = false;  // per-sequence key counts read on the device (ForwardArgs::seqused_k)
};

// Decode: at most this many query positions per sequence (speculative decoding's 1..16).
constexpr long long kDecodeMaxSeqlenQ = 16;
// Whether a forward runs as a decode: the split-KV kernel over GQA-packed query tiles, then
// the combine kernel (the one rule, for the runtime, the tuner and the dump). KV-cache
// forwards (paged, or per-sequence key counts) run there at any seqlen_q: the prefill kernels
// read neither. Packed sequences (varlen) run on the prefill kernels at any length, packed
// queries over a KV cache on split-KV.
bool decode_shaped(const ProblemKey& problem);
// Whether the problem has a backward: a KV-cache forward (paged, per-sequence key counts) has
// none (the runtime's prepare, the dump's --pass all).
bool has_backward(const ProblemKey& problem);

// Kernels in launch order. Forward: {fwd} or, decode-shaped, {fwd_splitkv, fwd_combine}
// (the combine launches only when the keys are split). Backward: {bwd_preprocess, bwd_dkdv,
// bwd_dq_convert} or, deterministic, {bwd_preprocess, bwd_dkdv, bwd_dq}.
std::vector<KernelSpec> select_forward_kernels(const ProblemKey& problem, Arch arch);
std::vector<KernelSpec> select_backward_kernels(const ProblemKey& problem, Arch arch);

// The KV append (Runtime::append_kv) for rows of head_dim elements of dtype into a dense or
// paged cache: 16 rows per CTA of 4 warps, so that a decode step's few rows still spread
// over many SMs (the append is a copy bound by latency).
// `packed`: the new rows are packed sequences (KvAppendArgs::cu_seqlens), the spec's varlen.
KernelSpec select_kv_append_kernel(int head_dim, DType dtype, bool paged, bool packed, Arch arch);

}  // namespace flashgen
