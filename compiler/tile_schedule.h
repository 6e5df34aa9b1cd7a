// The tile schedule of a kernel, computed on the host: which CTA visits which
// (Q tile, K/V tile) block of S = Q.K^T in which order, and which of those tiles the
// kernel masks. It mirrors the kernels' loops (templates/fwd/, templates/bwd/) and their
// visibility rule (flash::Visibility, templates/attention/visibility.cuh) so that `flashgen dump
// --emit schedule` draws what the GPU does, not what it should do.
#pragma once

#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

// The most tiles (Q tiles x K/V tiles) one kernel's schedule holds: beyond it a picture of the
// schedule is a blur and the file tens of MB, and its visit lists would take gigabytes.
constexpr long long kMaxScheduleTiles = 40000;

// The launch-time values a schedule depends on (a KernelSpec leaves them out).
struct ScheduleShape {
  int seqlen_q = 0;
  int seqlen_k = 0;
  // Used when the spec has a window; -1 = unbounded. Causal sets window_right = 0,
  // as validate_* does before every launch.
  int window_left = -1;
  int window_right = -1;
  int group = 1;  // query heads per K/V head (GQA): each bwd_dkdv CTA loops over them; fwd_splitkv packs them
  // The persistent forward (KernelSpec::persistent) walks the tiles of every (batch, head) slice
  // of the launch on its CTAs: the launch's slices and CTAs (one per SM; 0: one per tile), of
  // which the schedule draws the first slice.
  int slices = 1;
  int ctas = 0;

  // Throws Error(invalid_argument) naming the field when a value is out of range.
  void validate() const;
};

enum class TileState : unsigned char {
  skipped,   // never loaded: no query of the tile sees a key of it
  computed,  // loaded and computed without a mask
  masked,    // computed, and mask_scores sets some scores to -inf
};
const char* to_string(TileState s);

// One iteration of a CTA's main loop.
struct TileVisit {
  int q_tile = 0;
  int k_tile = 0;
  int head = 0;  // index of the query head within the GQA group (bwd_dkdv); 0 elsewhere
  bool masked = false;
  bool keys_past_end = false;  // masked because the tile reaches past seqlen_k
  bool window_edge = false;    // masked because the causal diagonal or a window edge cuts it
};

// One CTA of one (batch, head): what it owns and the tiles it visits, in loop order.
// (Persistent forward: one entry per tile of the first slice, in its walk's order; block_x is
// the CTA that takes the tile and `round` the tile's place in that CTA's walk.)
struct CtaWork {
  int block_x = 0;                 // blockIdx.x: CTAs of one (batch, head) start in this order
  int round = 0;                   // persistent: the CTA's tiles before this one, over every slice
  int tile = 0;                    // the tile it owns: Q tile (fwd, bwd_dq), K/V tile (bwd_dkdv), row block (others)
  int row_begin = 0, row_end = 0;  // the rows (queries, or keys for bwd_dkdv) of that tile, clipped
  std::vector<TileVisit> visits;   // empty for bwd_preprocess and bwd_dq_convert
};

struct PassSchedule {
  KernelSpec spec;
  int q_tiles = 0;                // of block_m queries (fwd_splitkv: packed rows, seqlen_q x group)
  int k_tiles = 0;                // of block_n keys
  std::vector<CtaWork> ctas;      // by blockIdx.x (persistent: by tile, in walk order)
  long long persistent_ctas = 0;  // the persistent forward's CTAs over every slice; 0 otherwise
  std::vector<TileState> states;  // q_tiles x k_tiles, row-major; head 0 of the group

  bool has_tile_loop() const {
    return spec.pass == Pass::fwd || spec.pass == Pass::bwd_dkdv || spec.pass == Pass::bwd_dq ||
           spec.pass == Pass::fwd_splitkv;
  }
  TileState state(int q_tile, int k_tile) const { return states[static_cast<size_t>(q_tile) * k_tiles + k_tile]; }
  int count(TileState s) const;
};

// The schedule of one kernel for one (batch, head) (one K/V head for bwd_dkdv).
PassSchedule schedule_pass(const KernelSpec& spec, const ScheduleShape& shape);

}  // namespace flashgen
