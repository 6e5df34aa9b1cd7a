// A CPU emulator for the generated sm_80 kernels and sm_90a's all-threads wgmma kernels, so
// that their logic (indexing, masks, pipelines, fragment layouts, descriptors, epilogues) is
// tested on machines without a GPU. The generated source is compiled as C++ with this prelude;
// the inline-PTX headers (templates/arch/ptx.cuh, cp_async.cuh, mma_sm80.cuh, wgmma_sm90.cuh,
// fence.cuh, atomics.cuh) are swapped for include/arch/, written from the PTX ISA's fragment
// and descriptor layouts. TMA, mbarriers and stmatrix are not emulated (the warp-specialised
// kernels). Each CUDA thread of a CTA runs as a fiber (ucontext); barriers, warp collectives
// (ldmatrix, mma.sync, shfl) and warpgroup ones (sm_90a's wgmma) switch fibers until every
// participant has arrived. CTAs run one after another, last to first. Slow, exact, deterministic.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "templates/params/attention_params.h"

// CUDA keywords and builtins the templates use.
#define __device__
#define __global__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(x) alignas(x)
#define __shared__

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float __int_as_float(unsigned v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline float __uint_as_float(unsigned v) { return __int_as_float(v); }
inline unsigned __float_as_uint(float f) {
  unsigned v;
  std::memcpy(&v, &f, 4);
  return v;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
using std::fmaf;
using std::fmaxf;

namespace emu {

// One CTA in flight: its fibers, shared memory and barrier state.
struct Cta {
  struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    bool done = false;
  };
  struct Warp {
    int arrived = 0;
    long generation = 0;
    std::uint32_t slot[32][6];  // per-lane operands of the collective in progress
    float value[32];
  };
  struct Warpgroup {  // sm_90a's wgmma: the 128 threads' A registers of the product in progress
    int arrived = 0;
    long generation = 0;
    std::uint32_t a[128][4];
  };
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;
  std::vector<unsigned char> smem;
  int cta_arrived = 0;
  long cta_generation = 0;
  std::vector<Warp> warps;
  std::vector<Warpgroup> warpgroups;
};

Cta& cta();
void yield();  // back to the scheduler, which resumes the next fiber

inline void barrier(int& arrived, long& generation, int count) {
  const long gen = generation;
  if (++arrived == count) {
    arrived = 0;
    ++generation;
    return;
  }
  while (generation == gen) yield();
}

inline int thread_index() { return cta().current; }
inline int lane() { return thread_index() % 32; }
inline Cta::Warp& current_warp() { return cta().warps[thread_index() / 32]; }
// Every lane of the current warp has arrived (the kernels launch whole warps).
inline void warp_sync() {
  Cta::Warp& w = current_warp();
  barrier(w.arrived, w.generation, 32);
}

inline Cta::Warpgroup& current_warpgroup() { return cta().warpgroups[thread_index() / 128]; }
// Every thread of the current warpgroup has arrived (wgmma's kernels launch whole warpgroups).
inline void warpgroup_sync() {
  Cta::Warpgroup& g = current_warpgroup();
  barrier(g.arrived, g.generation, 128);
}

using Kernel = void (*)(const FlashAttentionParams);

// Runs the grid: every CTA, one after another, each with `threads` fibers.
void launch(Kernel k, dim3 grid, int threads, int smem_bytes, const FlashAttentionParams& p);

// Generated translation units register their entry points by name.
std::map<std::string, Kernel>& registry();
struct Registration {
  Registration(const char* name, Kernel k) { registry()[name] = k; }
};

}  // namespace emu

extern dim3 threadIdx, blockIdx, gridDim, blockDim;

inline void __syncthreads() {
  emu::Cta& c = emu::cta();
  emu::barrier(c.cta_arrived, c.cta_generation, static_cast<int>(c.fibers.size()));
}

float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
int __shfl_sync(unsigned mask, int v, int src_lane);
int __any_sync(unsigned mask, int predicate);

inline float atomicAdd(float* p, float v) {
  const float old = *p;  // fibers never interleave inside this call
  *p = old + v;
  return old;
}
