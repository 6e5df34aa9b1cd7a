// Emulated arch/atomics.cuh for the CPU emulator: stands in for templates/arch/atomics.cuh (found first
// on the include path), same names and signatures.
#pragma once

#include "sm80_emulator.h"

namespace flash {

inline void red_add_v4(float* p, float a, float b, float c, float d) {
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
  atomicAdd(p + 2, c);
  atomicAdd(p + 3, d);
}

}  // namespace flash
