// Global-memory reductions without a return value.
#pragma once

namespace flash {

// *p += (a, b, c, d) for 4 consecutive floats (16-byte aligned) in global memory, one atomic
// instruction (sm_90).
__device__ __forceinline__ void red_add_v4(float* p, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

}  // namespace flash
