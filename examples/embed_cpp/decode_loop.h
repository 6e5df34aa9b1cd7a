// An inference engine's prefill + decode loop over a paged KV cache through the C++ API: the
// decode steps captured in one CUDA graph on the GPU, checked against the CPU backend.
#pragma once

#include <flashgen/flashgen.hpp>

// Returns false when a GPU output differs from the CPU backend's beyond bf16 rounding.
bool decode_loop(flashgen::Runtime& rt, unsigned seed);
