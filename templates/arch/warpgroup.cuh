// Warpgroups (4 consecutive warps, sm_90): the unit of wgmma and of register
// reallocation. setmaxnreg moves registers between warpgroups of a CTA: producers give
// theirs up (dec), consumers take them (inc); counts are multiples of 8 in 24..256.
#pragma once

namespace flash {

// The warpgroup of this thread, uniform across the warp (so that branches on it stay uniform).
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// A CTA of `warpgroups` warpgroups (one per SM) starts with the registers its launch
// gives each thread, 65,536 / threads rounded down to 8 (168 at 384 threads, 128 at 512),
// and setmaxnreg only moves registers inside that allocation: a split that asks for more
// than it (one producer warpgroup at kProducer, the others at kConsumer) makes the
// consumers' setmaxnreg.inc wait forever.
template <int kWarpgroups, int kProducer, int kConsumer>
constexpr bool register_split_fits() {
  constexpr int launch = 65536 / (128 * kWarpgroups) / 8 * 8;
  return kProducer + (kWarpgroups - 1) * kConsumer <= kWarpgroups * launch;
}

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

}  // namespace flash
