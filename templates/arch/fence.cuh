// Proxy fences (sm_90): wgmma and TMA read shared memory through the async proxy,
// st.shared and cp.async write it through the generic proxy.
#pragma once

namespace flash {

// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async) visible
// to the async proxy that wgmma reads operands through; a barrier must follow.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace flash
