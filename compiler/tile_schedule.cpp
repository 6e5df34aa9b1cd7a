#include "compiler/tile_schedule.h"

#include <fmt/format.h>

#include <algorithm>

namespace flashgen {
namespace {

// Rows of the D / dQ-accumulator buffers are padded to a multiple of this; mirrors
// kDqRowRounding in runtime/launch_plan.cpp, which sizes the bwd_preprocess and
// bwd_dq_convert grids with it.
constexpr int kDqRowRounding = 128;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Host mirror of flash::Visibility (templates/softmax.cuh); keep the two in step.
// Query i sees key j iff j < seqlen_k and i + off - left <= j <= i + off + right.
struct HostVisibility {
  int seqlen_q, seqlen_k, off, left, right;
  bool local;  // kLocal = kCausal || kWindow: otherwise left/right are not looked at

  HostVisibility(const KernelSpec& spec, const ScheduleShape& shape)
      : seqlen_q(shape.seqlen_q),
        seqlen_k(shape.seqlen_k),
        off(shape.seqlen_k - shape.seqlen_q),
        left(shape.window_left),
        // validate_* folds causal into the window before any launch.
        right(spec.causal ? 0 : shape.window_right),
        local(spec.causal || spec.window) {}

  // Visibility::key_range: keys [begin, end) seen by any query of [q0, q1).
  void key_range(int q0, int q1, int& begin, int& end) const {
    begin = 0;
    end = seqlen_k;
    if (local) {
      if (left >= 0) begin = std::max(begin, q0 + off - left);
      if (right >= 0) end = std::min(end, q1 - 1 + off + right + 1);
    }
  }

  // Visibility::query_range: queries [begin, end) that see any key of [k0, k1).
  void query_range(int k0, int k1, int& begin, int& end) const {
    begin = 0;
    end = seqlen_q;
    if (local) {
      if (right >= 0) begin = std::max(begin, k0 - off - right);
      if (left >= 0) end = std::min(end, k1 - 1 - off + left + 1);
    }
  }

  // Visibility::tile_visible is !keys_past_end(k1) && !window_cuts(q0, q1, k0, k1), split by
  // cause: does the tile reach past seqlen_k, does a window edge (the causal diagonal is
  // the right edge) cut its in-bounds keys.
  bool keys_past_end(int k1) const { return k1 > seqlen_k; }
  bool window_cuts(int q0, int q1, int k0, int k1) const {
    if (!local) return false;
    bool inside = true;
    if (left >= 0) inside = inside && k0 >= q1 - 1 + off - left;
    if (right >= 0) inside = inside && k1 - 1 <= q0 + off + right;
    return !inside;
  }
};

// Host mirror of flash::tile_span (templates/softmax.cuh): tile indices [begin, end)
// of size `tile` covering [lo, hi); empty when hi <= lo.
void tile_span(int tile, int lo, int hi, int& begin, int& end) {
  begin = std::max(lo, 0) / tile;
  end = hi > lo ? ceil_div(hi, tile) : begin;
}

// The mask check the kernels make before mask_scores, on the tile's query rows
// clipped to seqlen_q and its full key extent (keys past seqlen_k are masked).
// With `group` > 1 (fwd_splitkv's GQA-packed rows) the tile's rows hold query positions
// row / group.
TileVisit visit(const HostVisibility& vis, const KernelSpec& spec, int q_tile, int k_tile, int head, int group = 1) {
  const int r0 = q_tile * spec.block_m, r1 = std::min(r0 + spec.block_m, vis.seqlen_q * group);
  const int m0 = r0 / group, m1 = (r1 - 1) / group + 1;
  const int n0 = k_tile * spec.block_n, n1 = n0 + spec.block_n;
  TileVisit v;
  v.q_tile = q_tile;
  v.k_tile = k_tile;
  v.head = head;
  v.keys_past_end = vis.keys_past_end(n1);
  v.window_edge = vis.window_cuts(m0, m1, n0, std::min(n1, vis.seqlen_k));
  v.masked = v.keys_past_end || v.window_edge;
  return v;
}

// The persistent forward's CTA for Q tile `block` of the first slice (templates/scheduler/
// persistent.cuh): min(ctas, tiles) CTAs take the tiles of every slice in rounds; unmasked in
// the grid's order (rank block + slice x blocks), CTA rank % CTAs; masked longest first over
// every slice (rank (blocks - 1 - block) x slices + slice), and odd rounds from the far end.
struct PersistentSeat {
  int cta, round;
};
PersistentSeat persistent_seat(bool masked, int slices, int blocks, long long ctas, int block) {
  const long long rank = masked ? static_cast<long long>(blocks - 1 - block) * slices : block;
  const long long round = rank / ctas, in_round = rank % ctas;
  return {static_cast<int>(masked && round % 2 ? ctas - 1 - in_round : in_round), static_cast<int>(round)};
}

// fwd_kernel and bwd_dq_kernel: CTA blockIdx.x owns Q tile gridDim.x - 1 - blockIdx.x
// (heavier tiles under a causal mask first) and loops over the K/V tiles its rows see; the
// persistent forward: each tile with its CTA and round (persistent_seat), in walk order.
void schedule_query_tiles(PassSchedule& s, const HostVisibility& vis, const ScheduleShape& shape) {
  const KernelSpec& spec = s.spec;
  const bool persistent = spec.pass == Pass::fwd && spec.persistent;
  const bool masked = spec.causal || spec.window;
  const bool forward_walk = persistent && !masked;  // the unmasked walk: block 0 first
  if (persistent) {
    const long long tiles = static_cast<long long>(s.q_tiles) * shape.slices;
    s.persistent_ctas = shape.ctas > 0 ? std::min<long long>(shape.ctas, tiles) : tiles;
  }
  for (int x = 0; x < s.q_tiles; ++x) {
    CtaWork cta;
    cta.block_x = x;
    cta.tile = forward_walk ? x : s.q_tiles - 1 - x;
    if (persistent) {
      const PersistentSeat seat = persistent_seat(masked, shape.slices, s.q_tiles, s.persistent_ctas, cta.tile);
      cta.block_x = seat.cta;
      cta.round = seat.round;
    }
    cta.row_begin = cta.tile * spec.block_m;
    cta.row_end = std::min(cta.row_begin + spec.block_m, vis.seqlen_q);
    int key_lo, key_hi, n_begin, n_end;
    vis.key_range(cta.row_begin, cta.row_end, key_lo, key_hi);
    tile_span(spec.block_n, key_lo, key_hi, n_begin, n_end);
    for (int n = n_begin; n < n_end; ++n) cta.visits.push_back(visit(vis, spec, cta.tile, n, 0));
    s.ctas.push_back(std::move(cta));
  }
}

// fwd_splitkv_kernel: CTA blockIdx.x (of one split) owns packed tile blockIdx.x: block_m
// rows of (position, query head of the group), and loops over the K/V tiles its positions
// see; with several splits each takes a contiguous share of them (not drawn: the split count
// is a launch value).
void schedule_packed_tiles(PassSchedule& s, const HostVisibility& vis, int group) {
  const KernelSpec& spec = s.spec;
  for (int x = 0; x < s.q_tiles; ++x) {
    CtaWork cta;
    cta.block_x = x;
    cta.tile = x;
    cta.row_begin = x * spec.block_m;
    cta.row_end = std::min(cta.row_begin + spec.block_m, vis.seqlen_q * group);
    int key_lo, key_hi, n_begin, n_end;
    vis.key_range(cta.row_begin / group, (cta.row_end - 1) / group + 1, key_lo, key_hi);
    tile_span(spec.block_n, key_lo, key_hi, n_begin, n_end);
    for (int n = n_begin; n < n_end; ++n) cta.visits.push_back(visit(vis, spec, cta.tile, n, 0, group));
    s.ctas.push_back(std::move(cta));
  }
}

// bwd_dkdv_kernel: CTA blockIdx.x owns K/V tile blockIdx.x and runs work items
// t = 0 .. group * tiles_per_head - 1: query head t / tiles_per_head of its group,
// Q tile m_begin + t % tiles_per_head.
void schedule_key_tiles(PassSchedule& s, const HostVisibility& vis, int group) {
  const KernelSpec& spec = s.spec;
  for (int x = 0; x < s.k_tiles; ++x) {
    CtaWork cta;
    cta.block_x = x;
    cta.tile = x;
    cta.row_begin = x * spec.block_n;
    cta.row_end = std::min(cta.row_begin + spec.block_n, vis.seqlen_k);
    int q_lo, q_hi, m_begin, m_end;
    vis.query_range(cta.row_begin, cta.row_end, q_lo, q_hi);
    tile_span(spec.block_m, q_lo, q_hi, m_begin, m_end);
    const int tiles_per_head = m_end - m_begin;
    for (int t = 0; t < group * tiles_per_head; ++t)
      cta.visits.push_back(visit(vis, spec, m_begin + t % tiles_per_head, x, t / tiles_per_head));
    s.ctas.push_back(std::move(cta));
  }
}

// bwd_preprocess and bwd_dq_convert: CTA blockIdx.x owns rows [x * block_m, +block_m)
// of the buffers padded to kDqRowRounding rows (fwd_combine: of seqlen_q, rounding 1); no
// tile loop.
void schedule_row_blocks(PassSchedule& s, int seqlen_q, int rounding) {
  const int rounded = ceil_div(seqlen_q, rounding) * rounding;
  for (int x = 0; x < ceil_div(rounded, s.spec.block_m); ++x) {
    CtaWork cta;
    cta.block_x = x;
    cta.tile = x;
    cta.row_begin = std::min(x * s.spec.block_m, seqlen_q);
    cta.row_end = std::min((x + 1) * s.spec.block_m, seqlen_q);
    s.ctas.push_back(std::move(cta));
  }
}

}  // namespace

const char* to_string(TileState s) {
  switch (s) {
    case TileState::skipped:
      return "skipped";
    case TileState::computed:
      return "computed";
    case TileState::masked:
      return "masked";
  }
  return "unknown";
}

void ScheduleShape::validate() const {
  auto check = [](bool ok, const char* field, int value, const char* expected) {
    if (!ok) throw Error(Status::invalid_argument, fmt::format("{}: is {}, expected {}", field, value, expected));
  };
  check(seqlen_q >= 1, "seqlen_q", seqlen_q, ">= 1");
  check(seqlen_k >= 1, "seqlen_k", seqlen_k, ">= 1");
  check(window_left >= -1, "window_left", window_left, "-1 (unbounded) or >= 0");
  check(window_right >= -1, "window_right", window_right, "-1 (unbounded) or >= 0");
  check(group >= 1, "group", group, ">= 1 (query heads per K/V head)");
  check(slices >= 1, "slices", slices, ">= 1 ((batch, head) slices of the launch)");
  check(ctas >= 0, "ctas", ctas, ">= 0 (the persistent launch's CTAs; 0: one per tile)");
}

int PassSchedule::count(TileState s) const { return static_cast<int>(std::count(states.begin(), states.end(), s)); }

PassSchedule schedule_pass(const KernelSpec& spec, const ScheduleShape& shape) {
  shape.validate();
  if (spec.block_m < 1 || spec.block_n < 1)
    throw Error(Status::invalid_argument, fmt::format("spec {}: block_m {} and block_n {}, expected both >= 1",
                                                      spec.uri(), spec.block_m, spec.block_n));
  PassSchedule s;
  s.spec = spec;
  const int packed = spec.pass == Pass::fwd_splitkv ? shape.group : 1;
  s.q_tiles = ceil_div(shape.seqlen_q * packed, spec.block_m);
  s.k_tiles = ceil_div(shape.seqlen_k, spec.block_n);
  // Before anything is allocated.
  if (static_cast<long long>(s.q_tiles) * s.k_tiles > kMaxScheduleTiles)
    throw Error(Status::invalid_argument,
                fmt::format("schedule of {}: {} x {} tiles for seqlen_q {} and seqlen_k {}, expected at most {} tiles "
                            "per kernel; use shorter sequences or larger tiles",
                            spec.uri(), s.q_tiles, s.k_tiles, shape.seqlen_q, shape.seqlen_k, kMaxScheduleTiles));
  const HostVisibility vis(spec, shape);
  switch (spec.pass) {
    case Pass::fwd:
    case Pass::bwd_dq:
      schedule_query_tiles(s, vis, shape);
      break;
    case Pass::bwd_dkdv:
      schedule_key_tiles(s, vis, shape.group);
      break;
    case Pass::fwd_splitkv:
      schedule_packed_tiles(s, vis, shape.group);
      break;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
      schedule_row_blocks(s, shape.seqlen_q, kDqRowRounding);
      break;
    case Pass::fwd_combine:
    case Pass::kv_append:
      schedule_row_blocks(s, shape.seqlen_q, 1);
      break;
  }
  if (!s.has_tile_loop()) {
    s.k_tiles = 0;
    return s;
  }
  s.states.assign(static_cast<size_t>(s.q_tiles) * s.k_tiles, TileState::skipped);
  for (const CtaWork& cta : s.ctas)
    for (const TileVisit& v : cta.visits)
      if (v.head == 0)
        s.states[static_cast<size_t>(v.q_tile) * s.k_tiles + v.k_tile] =
            v.masked ? TileState::masked : TileState::computed;
  return s;
}

}  // namespace flashgen
