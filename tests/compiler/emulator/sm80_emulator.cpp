#include "sm80_emulator.h"

#include <bit>
#include <cstdio>
#include <cstdlib>

dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace emu {
namespace {

Cta* g_cta = nullptr;
Kernel g_kernel = nullptr;
const FlashAttentionParams* g_params = nullptr;
constexpr std::size_t kStackBytes = 512 * 1024;

void fiber_main() {
  g_kernel(*g_params);
  g_cta->fibers[g_cta->current].done = true;
  swapcontext(&g_cta->fibers[g_cta->current].context, &g_cta->scheduler);
}

// getcontext returns twice: kept in its own frame, away from the callers' locals.
[[gnu::noinline]] void make_fiber(Cta::Fiber& f) {
  f.stack.resize(kStackBytes);
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack.data();
  f.context.uc_stack.ss_size = f.stack.size();
  f.context.uc_link = nullptr;
  makecontext(&f.context, fiber_main, 0);
}

[[gnu::noinline]] void run_cta(Cta& c, int threads) {
  for (Cta::Fiber& f : c.fibers) make_fiber(f);
  int remaining = threads;
  while (remaining > 0) {
    remaining = 0;
    for (int t = 0; t < threads; ++t) {
      if (c.fibers[t].done) continue;
      c.current = t;
      threadIdx = dim3{static_cast<unsigned>(t), 0, 0};
      swapcontext(&c.scheduler, &c.fibers[t].context);
      remaining += !c.fibers[t].done;
    }
  }
}

}  // namespace

Cta& cta() { return *g_cta; }

void yield() {
  Cta& c = *g_cta;
  swapcontext(&c.fibers[c.current].context, &c.scheduler);
}

std::map<std::string, Kernel>& registry() {
  static std::map<std::string, Kernel> r;
  return r;
}

void launch(Kernel k, dim3 grid, int threads, int smem_bytes, const FlashAttentionParams& p) {
  g_kernel = k;
  g_params = &p;
  gridDim = grid;
  blockDim = dim3{static_cast<unsigned>(threads), 1, 1};
  // CTAs run last to first: the reverse of the order a GPU mostly starts them in, so that a
  // kernel whose CTAs write what others read (or overwrite each other's rows) fails here.
  for (unsigned zi = grid.z; zi-- > 0;)
    for (unsigned yi = grid.y; yi-- > 0;)
      for (unsigned xi = grid.x; xi-- > 0;) {
        const unsigned x = xi, y = yi, z = zi;
        auto c = std::make_unique<Cta>();
        g_cta = c.get();
        blockIdx = dim3{x, y, z};
        // Poisoned, so that a read of shared memory nothing wrote shows up as NaN.
        c->smem.assign(static_cast<std::size_t>(smem_bytes), 0xff);
        c->warps.resize(static_cast<std::size_t>((threads + 31) / 32));
        c->warpgroups.resize(static_cast<std::size_t>((threads + 127) / 128));
        c->fibers.resize(static_cast<std::size_t>(threads));
        run_cta(*c, threads);
        if (c->cta_arrived != 0) {
          std::fprintf(stderr, "emulator: CTA (%u,%u,%u) ended with threads waiting at __syncthreads\n", x, y, z);
          std::abort();
        }
        g_cta = nullptr;
      }
}

}  // namespace emu

float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  emu::Cta::Warp& w = emu::current_warp();
  const int l = emu::lane();
  w.value[l] = v;
  emu::warp_sync();
  const float r = w.value[l ^ lane_mask];
  emu::warp_sync();
  return r;
}

int __any_sync(unsigned, int predicate) {
  emu::Cta::Warp& w = emu::current_warp();
  w.value[emu::lane()] = predicate != 0 ? 1.0f : 0.0f;
  emu::warp_sync();
  bool any = false;
  for (float x : w.value) any |= x != 0.0f;
  emu::warp_sync();
  return any;
}

int __shfl_sync(unsigned, int v, int src_lane) {
  emu::Cta::Warp& w = emu::current_warp();
  const int l = emu::lane();
  w.value[l] = std::bit_cast<float>(v);
  emu::warp_sync();
  const int r = std::bit_cast<int>(w.value[src_lane & 31]);
  emu::warp_sync();
  return r;
}
