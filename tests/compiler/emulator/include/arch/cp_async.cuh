// Emulated arch/cp_async.cuh for the CPU emulator: stands in for templates/arch/cp_async.cuh (found first on
// the include path), same names and signatures, in C++ that follows the PTX ISA.
#pragma once

#include "sm80_emulator.h"
#include "arch/ptx.cuh"

namespace flash {

inline void cp_async16(u32 dst, const void* src, bool valid) {
  unsigned char* d = smem_at(dst, 16);
  if (valid)
    std::memcpy(d, src, 16);
  else
    std::memset(d, 0, 16);
}
inline void cp_async_commit() {}
template <int kPending>
inline void cp_async_wait() {}

}  // namespace flash
