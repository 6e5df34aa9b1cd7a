// Launching a KernelLaunch through cuLaunchKernelEx: its grid, block and dynamic shared
// memory, and its launch attributes (a thread-block cluster, programmatic dependent
// launch). The attribute list is built by a pure function, so tests check it without a GPU.
#pragma once

#include <cuda.h>

#include <array>

#include "runtime/launch_plan.h"

namespace flashgen {

// The attributes of one launch: none for the defaults (cluster 1x1x1, no PDL).
struct LaunchAttributes {
  std::array<CUlaunchAttribute, 2> items{};
  unsigned count = 0;
};

// Throws Error(invalid_argument) naming the kernel for a cluster that has a zero dimension,
// does not divide the grid or exceeds 8 CTAs (the portable cluster size), and for either
// attribute on an arch before sm_90.
LaunchAttributes launch_attributes(const KernelLaunch& launch);

// The configuration cuLaunchKernelEx takes; it points into `attributes`, which must outlive it.
CUlaunchConfig launch_config(const KernelLaunch& launch, CUstream stream, LaunchAttributes& attributes);

// Launches `function` (the loaded kernel of launch.spec) with `args` on `stream`. Every
// kernel launch of the runtime, its tuner and its timers goes through here.
void launch_kernel(CUfunction function, const KernelLaunch& launch, CUstream stream, void** args);

}  // namespace flashgen
