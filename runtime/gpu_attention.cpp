// The GPU backend: a launch plan (runtime/launch_plan.h) run on the caller's stream
// with cached, loaded kernels. Nothing here synchronises the stream.
#include "runtime/gpu_attention.h"

#include <fmt/format.h>

#include "runtime/cuda_driver.h"
#include "runtime/kernel_launch.h"
#include "runtime/launch_plan.h"
#include "runtime/tensor_maps.h"

namespace flashgen {
namespace {

void launch(KernelCache& cache, KernelLaunch& l, CUstream stream) {
  if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) return;
  // TMA descriptors are encoded here, not in the plan (plans are also built without a GPU),
  // and before the load, so that tensors TMA cannot describe fail before any compile.
  if (l.spec.warp_specialized()) encode_tensor_maps(l.spec, l.params);
  const LoadedKernel k = cache.load(l.spec);
  void* args[] = {&l.params};
  launch_kernel(k.function, l, stream, args);
}

}  // namespace

Arch device_arch(int device) {
  const CudaDriver& d = cuda_driver();
  CUdevice dev;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  int major = 0, minor = 0;
  check_cuda(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  check_cuda(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  const int cc = major * 10 + minor;
  if (cc == 90) return Arch::sm_90a;
  if (cc == 89) return Arch::sm_89;
  if (cc >= 86 && cc < 89) return Arch::sm_86;  // sm_86 cubins run on 8.6 and 8.7
  if (cc >= 80 && cc < 86) return Arch::sm_80;
  throw Error(Status::unsupported,
              fmt::format("device {}: compute capability {}.{} is not supported by the generated kernels (expected 8.x "
                          "or 9.0); use the CPU backend",
                          device, major, minor));
}

std::vector<KernelSpec> forward_specs(const Problem& p, Arch arch) {
  std::vector<KernelSpec> out;
  for (const KernelLaunch& l : plan_forward(ForwardArgs{}, p, arch)) out.push_back(l.spec);
  return out;
}

std::vector<KernelSpec> backward_specs(const Problem& p, Arch arch) {
  std::vector<KernelSpec> out;
  for (const KernelLaunch& l : plan_backward(BackwardArgs{}, p, arch, nullptr)) out.push_back(l.spec);
  return out;
}

std::size_t gpu_backward_workspace_bytes(const Problem& p, Arch) { return backward_workspace_bytes(p); }

void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream) {
  gpu_forward(cache, args, p, stream, select_forward_kernels(problem_key(p), device_arch(p.device)));
}

void gpu_backward(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream) {
  gpu_backward(cache, args, p, stream, select_backward_kernels(problem_key(p), device_arch(p.device)));
}

void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream,
                 const std::vector<KernelSpec>& specs) {
  for (KernelLaunch& l : plan_forward(args, p, specs)) launch(cache, l, stream);
}

void gpu_backward(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream,
                  const std::vector<KernelSpec>& specs) {
  const std::size_t need = backward_workspace_bytes(p);
  const CudaDriver& d = cuda_driver();
  void* workspace = args.workspace;
  CUdeviceptr owned = 0;
  if (workspace != nullptr) {
    if (args.workspace_bytes < need)
      throw Error(Status::invalid_argument,
                  fmt::format("workspace_bytes: is {}, expected at least {} (Runtime::backward_workspace_bytes)",
                              args.workspace_bytes, need));
  } else {
    check_cuda(d.cuMemAllocAsync(&owned, need, stream), "cuMemAllocAsync (backward workspace)");
    workspace = reinterpret_cast<void*>(owned);
  }
  try {
    for (KernelLaunch& l : plan_backward(args, p, specs, workspace)) launch(cache, l, stream);
  } catch (...) {
    if (owned) d.cuMemFreeAsync(owned, stream);
    throw;
  }
  if (owned) check_cuda(d.cuMemFreeAsync(owned, stream), "cuMemFreeAsync (backward workspace)");
}

}  // namespace flashgen
