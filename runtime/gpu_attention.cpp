// Placeholder until its owner lands the implementation.
#include "runtime/gpu_attention.h"
namespace flashgen {
Arch device_arch(int) { return Arch::sm_90a; }
std::vector<KernelSpec> forward_specs(const Problem&, Arch) { return {}; }
std::vector<KernelSpec> backward_specs(const Problem&, Arch) { return {}; }
std::size_t gpu_backward_workspace_bytes(const Problem&, Arch) { return 0; }
void gpu_forward(KernelCache&, const ForwardArgs&, const Problem&, CUstream) { throw Error(Status::unsupported, "GPU kernels: not yet available"); }
void gpu_backward(KernelCache&, const BackwardArgs&, const Problem&, CUstream) { throw Error(Status::unsupported, "GPU kernels: not yet available"); }
}  // namespace flashgen
