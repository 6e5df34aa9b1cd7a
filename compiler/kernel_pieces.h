// Which device pieces (templates/) a spec's kernel is assembled from: the kernel template,
// its tile scheduler, mainloop and epilogue. One place for the choice: codegen instantiates
// it, shared_memory.cpp sizes its layout, `flashgen dump --emit source` shows it.
#pragma once

#include <string>
#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

// The dK/dV algorithms, one mainloop each (templates/bwd/dkdv_mainloop_*.cuh).
enum class DkdvMainloop {
  sm80,                // mma.sync, warps split keys (and the head dim)
  sm90,                // wgmma, two warpgroups of 64 keys each (d64/96/128)
  sm90_shared_scores,  // wgmma at d256: both warpgroups on the same keys, S^T and dP^T shared
  sm90_ws,             // warp-specialised: TMA producer, two consumer warpgroups, dQ by bulk reduction
  sm90_ws_shared_scores,  // warp-specialised at d256: sm90_shared_scores' split on sm90_ws' producer and dQ writer
};
DkdvMainloop dkdv_mainloop(const KernelSpec& spec);

struct KernelPieces {
  std::vector<std::string> headers;  // what the instantiation includes ("fwd/fwd_kernel.cuh", ...)
  std::string kernel;  // the instantiated kernel type over `Traits` (flash::KernelTraits<Spec>)
};
KernelPieces kernel_pieces(const KernelSpec& spec);

// The warp-specialised dK/dV kernel under a mask walks the block-major section grid
// (scheduler/section_grid.cuh, the heaviest key blocks first); the launch plan shapes its grid.
bool dkdv_section_grid(const KernelSpec& spec);

}  // namespace flashgen
