// Emulated arch/fence.cuh for the CPU emulator: stands in for templates/arch/fence.cuh (found first on
// the include path). The emulator has one proxy: writes are visible to the emulated wgmma as they land.
#pragma once

namespace flash {

inline void fence_async_shared() {}

}  // namespace flash
