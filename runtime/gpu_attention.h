// The GPU backend: picks kernel specs for a problem, gets them from the cache
// (compiling on a miss), and launches them on the caller's stream.
#pragma once

#include <cuda.h>

#include <vector>

#include "compiler/kernel_spec.h"
#include "flashgen/flashgen.hpp"
#include "runtime/kernel_cache.h"
#include "runtime/validate.h"

namespace flashgen {

// The target arch of a device (sm_90a for Hopper, else sm_XY).
Arch device_arch(int device);
// The device's SM count (cached per device): what the split-KV decode sizes its grid by.
int device_sm_count(int device);

// The kernel specs (in launch order) that forward / backward use for a problem on arch.
std::vector<KernelSpec> forward_specs(const Problem& p, Arch arch);
std::vector<KernelSpec> backward_specs(const Problem& p, Arch arch);

std::size_t gpu_backward_workspace_bytes(const Problem& p, Arch arch);

void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream);
void gpu_backward(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream);

// The same with the kernels given (an autotune winner or a candidate being timed), in the
// order select_forward_kernels / select_backward_kernels return them.
void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream,
                 const std::vector<KernelSpec>& specs);
// The same planned for a GPU of sm_count SMs (the split-KV decode's split count follows it):
// what tests use to run one problem with and without split keys.
void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream,
                 const std::vector<KernelSpec>& specs, int sm_count);
void gpu_backward(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream,
                  const std::vector<KernelSpec>& specs);

// The KV append's one launch (plan_kv_append) for the device's arch.
void gpu_kv_append(KernelCache& cache, const KvAppendArgs& args, const KvAppendProblem& problem, Arch arch,
                   CUstream stream);

}  // namespace flashgen
