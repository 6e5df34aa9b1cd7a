// Tile sizes come from callers (tests, autotuning experiments): reject nonsense early.
#pragma once

#include <fmt/format.h>

#include "runtime/cpu/cpu_attention.h"

namespace flashgen::cpu {

inline void check_tile_config(const TileConfig& tiles) {
  if (tiles.block_m < 1 || tiles.block_n < 1)
    throw Error(Status::invalid_argument,
                fmt::format("cpu tiled attention: tiles.block_m = {}, tiles.block_n = {}; expected both >= 1",
                            tiles.block_m, tiles.block_n));
}

}  // namespace flashgen::cpu
