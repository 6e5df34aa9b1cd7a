#include "runtime/kernel_launch.h"

#include <fmt/format.h>

#include "runtime/cuda_driver.h"

namespace flashgen {

LaunchAttributes launch_attributes(const KernelLaunch& l) {
  LaunchAttributes out;
  const auto& c = l.cluster;
  const bool clustered = c[0] != 1 || c[1] != 1 || c[2] != 1;
  if (!clustered && !l.programmatic_dependent_launch) return out;
  // Both are Hopper features; an older arch would fail at launch with a vaguer error.
  if (compute_capability(l.spec.arch) < 90)
    throw Error(Status::invalid_argument,
                fmt::format("{}: {} needs sm_90 or later, the kernel is for {}", l.spec.uri(),
                            clustered ? "a thread-block cluster" : "programmatic dependent launch",
                            to_string(l.spec.arch)));
  if (clustered) {
    for (int i = 0; i < 3; ++i)
      if (c[i] == 0 || l.grid[i] % c[i] != 0)
        throw Error(Status::invalid_argument,
                    fmt::format("{}: cluster is {}x{}x{}, expected dimensions >= 1 dividing the grid {}x{}x{}",
                                l.spec.uri(), c[0], c[1], c[2], l.grid[0], l.grid[1], l.grid[2]));
    if (c[0] * c[1] * c[2] > 8)
      throw Error(Status::invalid_argument,
                  fmt::format("{}: cluster is {}x{}x{} = {} CTAs, expected at most 8 (the portable cluster size)",
                              l.spec.uri(), c[0], c[1], c[2], c[0] * c[1] * c[2]));
    CUlaunchAttribute& a = out.items[out.count++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = c[0];
    a.value.clusterDim.y = c[1];
    a.value.clusterDim.z = c[2];
  }
  if (l.programmatic_dependent_launch) {
    CUlaunchAttribute& a = out.items[out.count++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  return out;
}

CUlaunchConfig launch_config(const KernelLaunch& l, CUstream stream, LaunchAttributes& attributes) {
  attributes = launch_attributes(l);
  CUlaunchConfig config{};
  config.gridDimX = l.grid[0];
  config.gridDimY = l.grid[1];
  config.gridDimZ = l.grid[2];
  config.blockDimX = static_cast<unsigned>(l.spec.threads());
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(l.spec.shared_memory_bytes());
  config.hStream = stream;
  config.attrs = attributes.count ? attributes.items.data() : nullptr;
  config.numAttrs = attributes.count;
  return config;
}

void launch_kernel(CUfunction function, const KernelLaunch& l, CUstream stream, void** args) {
  LaunchAttributes attributes;
  const CUlaunchConfig config = launch_config(l, stream, attributes);
  check_cuda(cuda_driver().cuLaunchKernelEx(&config, function, args, nullptr), "cuLaunchKernelEx",
             [&] { return l.spec.uri(); });
}

}  // namespace flashgen
