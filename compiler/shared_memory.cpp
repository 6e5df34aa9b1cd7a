// Shared memory each pass's kernel allocates, bytes: the host's side of the device layouts
// (FwdMainloop::Layout, FwdMainloopSm90::Layout, FwdSplitKvMainloop::Layout, DkdvLayout, BwdDqMainloop::Layout; SmemTile and WgmmaTile in
// templates/tile/smem_tile.cuh). validate() compares it with the arch limit; every generated
// source static_asserts that its kernel's layout has exactly this size.
#include "compiler/kernel_pieces.h"
#include "compiler/kernel_spec.h"
#include "templates/params/attention_params.h"

#include <algorithm>

namespace flashgen {
namespace {

// SmemTile<rows, cols>: rows of 16-bit elements; swizzled when a row holds a
// multiple of 8 16-byte chunks, else padded by one chunk.
int tile_bytes(int rows, int cols) {
  const bool swizzled = (cols / 8) % 8 == 0;
  return rows * (swizzled ? cols : cols + 8) * 2;
}

// Head-dim tiles are kHeadDimCols wide (params/kernel_traits.cuh): wgmma tiles are whole
// 64-column blocks.
int head_dim_cols(const KernelSpec& s) {
  return s.uses_wgmma() ? (s.padded_head_dim() + 63) / 64 * 64 : s.padded_head_dim();
}

// The warp-specialised forward without its staging choice: Q, `stages` x (K, V) and the
// mbarriers of Q and of the K and V rings (full and empty per stage), 8 bytes each.
int forward_ws_bytes(int q_tile, int kv_tile, int stages) { return q_tile + stages * 2 * kv_tile + 8 * (1 + 4 * stages); }

}  // namespace

// A tile of its own lets the O store overlap the next tile's first P.V (d64 192 x 128 ran 2.5 %
// faster at N = 1k with it than over the ring, H200, 2026-12-04); over the V ring (FA3's
// arrangement) the next tile's first V waits for the store, but d128's 128 x 176 and d256's
// tiles fit persistent.
bool KernelSpec::o_staged_over_v() const {
  if (pass != Pass::fwd || !persistent) return false;
  const int d = head_dim_cols(*this);
  // + Q's `empty` mbarrier
  return forward_ws_bytes(tile_bytes(block_m, d), tile_bytes(block_n, d), stages) + tile_bytes(block_m, d) + 8 >
         max_shared_memory(arch);
}

int KernelSpec::shared_memory_bytes() const {
  const int d = head_dim_cols(*this);
  switch (pass) {
    case Pass::fwd:  // Q tile + `stages` x (K tile, V tile); warp-specialised: + the mbarriers;
                     // persistent: + Q's `empty` mbarrier and the O staging tile, or O's `empty`
                     // mbarrier where O is staged over the V ring
      if (!warp_specialized()) return tile_bytes(block_m, d) + stages * 2 * tile_bytes(block_n, d);
      return forward_ws_bytes(tile_bytes(block_m, d), tile_bytes(block_n, d), stages) +
             (!persistent ? 0 : o_staged_over_v() ? 16 : tile_bytes(block_m, d) + 8);
    case Pass::bwd_dkdv: {  // K, V tiles + `stages` x (Q, dO tiles, lse and D rows) + dS^T tile (atomic dQ)
      const int align = uses_wgmma() ? 1024 : 16;  // wgmma tiles start 1024-byte aligned
      const int stage = (2 * tile_bytes(block_m, d) + 2 * block_m * 4 + align - 1) / align * align;
      // wgmma at d256 ("shared scores"): dS^T, P^T and the fp32 dP^T fragments of warpgroup 1.
      const DkdvMainloop mainloop = dkdv_mainloop(*this);
      const bool shared_scores =
          mainloop == DkdvMainloop::sm90_shared_scores || mainloop == DkdvMainloop::sm90_ws_shared_scores;
      // dS^T, or dS [query][key] where the queries are no whole 64-column blocks of a wgmma
      // tile (DkdvLayout::kDsByQuery).
      const int ds = uses_wgmma() && block_m % 64 != 0 ? tile_bytes(block_m, block_n) : tile_bytes(block_n, block_m);
      const int scores = shared_scores ? 2 * ds + block_n * block_m * 4 : (deterministic ? 0 : ds);
      // Warp-specialised: the mbarriers of K/V and of the ring (full and empty per stage); at
      // d <= 128 (unless deterministic) also dS^T's second buffer and dQ staging boxes of
      // their own, kFlashDqBoxCols columns x flash_dq_box_rows(block_m) rows each, over every
      // column of every row block (d256 stages dQ over the Q/dO stage).
      const int box_rows = flash_dq_box_rows(block_m);
      const int dq_staging = block_m / box_rows * ((padded_head_dim() + kFlashDqBoxCols - 1) / kFlashDqBoxCols) *
                             kFlashDqBoxCols * box_rows * 4;
      const bool dq_tile = mainloop == DkdvMainloop::sm90_ws && !deterministic;
      const int ws = !warp_specialized() ? 0 : (dq_tile ? ds + dq_staging : 0) + 8 + 16 * stages;
      return 2 * tile_bytes(block_n, d) + stages * stage + scores + ws;
    }
    case Pass::bwd_dq:  // Q, dO tiles + `stages` x (K tile, V tile)
      return 2 * tile_bytes(block_m, d) + stages * 2 * tile_bytes(block_n, d);
    case Pass::fwd_splitkv: {  // the Q tile + `stages` x (K tile, V tile); after the loop the same
                               // bytes hold each warp's fp32 O rows (padded by 8 floats) and lse
      const int ring = tile_bytes(block_m, d) + stages * 2 * tile_bytes(block_n, d);
      const int rows = decode_warp_rows();
      const int merge = warps * rows * (padded_head_dim() + 8) * 4 + warps * rows * 4;
      return std::max(ring, merge);
    }
    case Pass::fwd_combine:  // a row's part weights and merged lse, the 8-column sums of each split group
      return kFlashMaxSplits * 4 + 16 + threads() / (padded_head_dim() / 8) * padded_head_dim() * 4;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
    case Pass::kv_append:
      return 0;
  }
  return 0;
}

}  // namespace flashgen
