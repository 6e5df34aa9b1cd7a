// The CPU backend: the seed's algorithm in C++. `standard` materialises S and P
// in fp64 (the oracle every test compares with); `tiled` is the FlashAttention
// forward with the m/l ledger and the backward that recomputes P from lse.
#pragma once

#include "flashgen/flashgen.hpp"
#include "runtime/validate.h"

namespace flashgen::cpu {

// Tile sizes of the tiled backend (rows of Q, rows of K/V per tile).
struct TileConfig {
  int block_m = 64;
  int block_n = 64;
};

// All functions take validated arguments (validate_forward/backward) and the Problem
// they returned; `threads` = 0 means hardware concurrency.
void standard_forward(const ForwardArgs& args, const Problem& p);
void standard_backward(const BackwardArgs& args, const Problem& p);
void tiled_forward(const ForwardArgs& args, const Problem& p, int threads, TileConfig tiles = {});
void tiled_backward(const BackwardArgs& args, const Problem& p, int threads, TileConfig tiles = {});

}  // namespace flashgen::cpu
