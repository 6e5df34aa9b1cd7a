// KernelSpec -> CUDA source. Deterministic: the same spec gives byte-identical text.
#pragma once

#include <string>

#include "compiler/kernel_spec.h"

namespace flashgen {

struct GeneratedSource {
  std::string kernel_name;  // the extern "C" __global__ entry point (the spec's URI)
  std::string source;       // self-contained: needs no header on disk
};

// Validates the spec (throws Error(invalid_argument)) and assembles its source
// from the embedded templates.
GeneratedSource generate_source(const KernelSpec& spec);

}  // namespace flashgen
