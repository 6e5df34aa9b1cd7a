// The GPU backend: a launch plan (runtime/launch_plan.h) run on the caller's stream
// with cached, loaded kernels. Nothing here synchronises the stream.
#include "runtime/gpu_attention.h"

#include <fmt/format.h>

#include <atomic>

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

// Runs `launches(workspace)` with `need` bytes of device workspace: the caller's (`given`,
// checked against `given_bytes`; `sizer` names the call that tells its size) or
// stream-ordered memory allocated and freed on `stream`.
template <class Launches>
void with_workspace(std::size_t need, void* given, std::size_t given_bytes, const char* sizer, CUstream stream,
                    const Launches& launches) {
  if (given != nullptr || need == 0) {
    if (given != nullptr && given_bytes < need)
      throw Error(Status::invalid_argument,
                  fmt::format("workspace_bytes: is {}, expected at least {} ({})", given_bytes, need, sizer));
    return launches(given);
  }
  const CudaDriver& d = cuda_driver();
  CUdeviceptr owned = 0;
  check_cuda(d.cuMemAllocAsync(&owned, need, stream), "cuMemAllocAsync (workspace)");
  try {
    launches(reinterpret_cast<void*>(owned));
  } catch (...) {
    d.cuMemFreeAsync(owned, stream);
    throw;
  }
  check_cuda(d.cuMemFreeAsync(owned, stream), "cuMemFreeAsync (workspace)");
}

}  // namespace

int device_sm_count(int device) {
  static std::atomic<int> known[64] = {};
  if (device >= 0 && device < 64)
    if (const int n = known[device].load(std::memory_order_relaxed)) return n;
  const CudaDriver& d = cuda_driver();
  CUdevice dev;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  int n = 0;
  check_cuda(d.cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
  if (device >= 0 && device < 64) known[device].store(n, std::memory_order_relaxed);
  return n;
}

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
  for (const KernelLaunch& l : plan_forward(ForwardArgs{}, p, arch, 1, nullptr)) out.push_back(l.spec);
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
  gpu_forward(cache, args, p, stream, specs, device_sm_count(p.device));
}

void gpu_forward(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream,
                 const std::vector<KernelSpec>& specs, int sm_count) {
  const int splits = split_count(p, specs, sm_count);  // once: the workspace and the plan both follow it
  with_workspace(forward_workspace_bytes(p, splits), nullptr, 0, "", stream, [&](void* workspace) {
    for (KernelLaunch& l : plan_forward(args, p, specs, splits, workspace, sm_count)) launch(cache, l, stream);
  });
}

void gpu_backward(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream,
                  const std::vector<KernelSpec>& specs) {
  with_workspace(backward_workspace_bytes(p), args.workspace, args.workspace_bytes,
                 "Runtime::backward_workspace_bytes", stream, [&](void* workspace) {
    for (KernelLaunch& l : plan_backward(args, p, specs, workspace)) launch(cache, l, stream);
  });
}

void gpu_kv_append(KernelCache& cache, const KvAppendArgs& args, const KvAppendProblem& problem, Arch arch,
                   CUstream stream) {
  KernelLaunch l = plan_kv_append(args, problem, arch);
  launch(cache, l, stream);
}

}  // namespace flashgen
