// What every kernel derives from the generated Spec (the KernelSpec's fields and the
// host-derived constants: kHeadDim, kHeadDimPadded, kBlockM, kBlockN, kWarps, kStages,
// kCausal, kWindow, kSoftcap, kDeterministic, kPaged, kVarlen, kIsBf16, kVecLoad, kWgmma, kOOverV;
// fwd_splitkv: kDecodeKeySlices). Kernels and
// their pieces are templates over these traits; nothing is configured by globals.
#pragma once

#include "arch/numeric.cuh"
#include "attention/offsets.cuh"
#include "tile/smem_tile.cuh"

namespace flash {

template <class Spec>
struct KernelTraits : Spec {
  static constexpr int kThreads = Spec::kWarps * 32;
  // Visibility depends on (query, key) position, not just on the key bound.
  static constexpr bool kLocal = Spec::kCausal || Spec::kWindow;
  // wgmma tiles are whole 64-column blocks, so head-dim tiles are kHeadDimCols wide: d96 is
  // stored 128 wide, its last 32 columns zero (load_tile fills them, store_tile never writes them).
  static constexpr int kHeadDimCols = Spec::kWgmma ? (Spec::kHeadDimPadded + 63) / 64 * 64 : Spec::kHeadDimPadded;

  using Element = Element16<Spec::kIsBf16>;
  // Where each (batch, head) slice starts and how long its sequences are: dense or packed.
  using Offsets = SeqOffsets<Spec::kVarlen>;
  // The tiles the products read: wgmma's layout on the wgmma path, SmemTile otherwise.
  template <int R, int C>
  using Tile = KernelTile<Spec::kWgmma, R, C>;
};

}  // namespace flash
