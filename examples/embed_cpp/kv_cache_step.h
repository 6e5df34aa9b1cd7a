// A decode step over a paged KV cache through the C++ API, on the CPU backend.
#pragma once

#include <flashgen/flashgen.hpp>

// Returns false when attention over the paged cache differs from the dense forward over
// the same keys.
bool paged_decode_step(flashgen::Runtime& rt, unsigned seed);
