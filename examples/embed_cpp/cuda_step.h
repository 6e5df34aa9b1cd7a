// The GPU half of the example: one attention training step on raw CUDA buffers,
// checked against flashgen's CPU backend.
#pragma once

#include <flashgen/flashgen.hpp>

// Returns false when the GPU results disagree with the CPU backend. Where no CUDA device
// (or driver) is present it says so and returns true: the CPU part has already run.
bool cuda_training_step(flashgen::Runtime& rt, unsigned seed);
