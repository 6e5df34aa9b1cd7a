// What the GPU backend launches for a problem, as plain data: each kernel's spec,
// grid and filled parameter block, in launch order. gpu_attention.cpp launches a
// plan on a stream; tests run the same plan through the CPU emulator of the kernels.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/kernel_selection.h"
#include "compiler/kernel_spec.h"
#include "runtime/validate.h"
#include "templates/params/attention_params.h"

namespace flashgen {

// CUDA's bound on gridDim.y and gridDim.z (validate.cpp refuses problems past it; plans keep
// their grids within it).
constexpr std::int64_t kMaxGridYZ = 65535;

struct KernelLaunch {
  KernelSpec spec;
  std::array<unsigned, 3> grid{};  // a zero dimension means nothing to launch
  FlashAttentionParams params{};
  // Launch attributes (runtime/kernel_launch.h; sm_90+). A cluster of 1x1x1 and no PDL add none.
  std::array<unsigned, 3> cluster{1, 1, 1};  // CTAs per thread-block cluster; divides the grid
  bool programmatic_dependent_launch = false;  // may start before the previous kernel on the stream ends
};

// Bytes of the backward workspace: the fp32 dQ accumulator (unless deterministic), then D.
std::size_t backward_workspace_bytes(const Problem& p);

// What kernel selection (heuristic table or autotune winners) looks at for a problem.
ProblemKey problem_key(const Problem& p);
// The same for a declared shape (batch and heads 1, causal folded in as validation does):
// what `flashgen tune` tunes and `flashgen cache warm` compiles for it.
ProblemKey problem_key(const TuneShape& shape);

// The decode forward's split count (fwd_splitkv in `specs`; 1 otherwise) on a GPU of
// sm_count SMs: the work spread evenly over the SMs, each split at least two key tiles.
int split_count(const Problem& p, const std::vector<KernelSpec>& specs, int sm_count);
// Bytes of the forward workspace for `num_splits` (split_count): the split-KV parts (fp32 O
// rows and lse), 0 with one split.
std::size_t forward_workspace_bytes(const Problem& p, int num_splits);

// `num_splits` (split_count; only a decode plan reads it) and `workspace` of
// forward_workspace_bytes(p, num_splits) bytes of device memory.
std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, Arch arch, int num_splits,
                                       void* workspace);
// `workspace` holds backward_workspace_bytes(p) bytes of device memory.
std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p, Arch arch, void* workspace);

// The same plans with the kernels chosen by the caller (an autotune winner), in the
// order select_forward_kernels / select_backward_kernels return them. A persistent forward
// launches min(work tiles, sm_count) CTAs (every tile its own CTA when sm_count is 0: the
// kernel takes any grid).
std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, const std::vector<KernelSpec>& specs,
                                       int num_splits, void* workspace, int sm_count = 0);
std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p,
                                        const std::vector<KernelSpec>& specs, void* workspace);

// The KV append (Runtime::append_kv): one launch of the kv_append kernel for the arch.
KernelLaunch plan_kv_append(const KvAppendArgs& args, const KvAppendProblem& problem, Arch arch);

}  // namespace flashgen
