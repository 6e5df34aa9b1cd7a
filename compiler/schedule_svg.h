// The tile schedule as a picture: one SVG panel per kernel of a forward+backward
// variant, each a grid of (Q tile, K/V tile) blocks coloured computed / masked /
// skipped, numbered in each CTA's loop order, with where the ledger (lse) and D are
// written and read. What `flashgen dump --emit schedule` writes.
//
// Every tile is a <rect class="tile STATE" data-pass="PASS" ...>, STATE one of
// computed, masked, skipped; tests count them against the schedule model.
#pragma once

#include <string>
#include <vector>

#include "compiler/tile_schedule.h"

namespace flashgen {

// `passes` in launch order (fwd, bwd_preprocess, bwd_dkdv, bwd_dq or bwd_dq_convert; any
// subset), all computed for `shape`.
std::string schedule_svg(const std::vector<PassSchedule>& passes, const ScheduleShape& shape);

}  // namespace flashgen
