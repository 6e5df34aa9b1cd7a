// Programmatic dependent launch (sm_90+): a kernel launched with the PDL attribute
// (KernelLaunch::programmatic_dependent_launch) may be scheduled before the kernel ahead of
// it on the stream has finished, so that its launch overlaps that kernel's tail; it must
// wait before it reads what that kernel writes. Without PDL (older archs, the CPU
// emulator) both calls are no-ops and stream order alone holds.
#pragma once

namespace flash {

// Blocks until the kernel ahead on the stream has completed and its writes are visible.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the dependent kernel be scheduled now (it still waits in grid_dependency_wait).
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace flash
