// KernelSpec -> CUDA source. Deterministic: the same spec gives byte-identical text.
#pragma once

#include <string>

#include "compiler/kernel_spec.h"

namespace flashgen {

struct GeneratedSource {
  std::string kernel_name;  // the extern "C" __global__ entry point (the spec's URI)
  // The includes of the kernel's device pieces (the embedded templates: embedded_files.h,
  // handed to NVRTC by name) and one instantiation of them with the spec's constants.
  std::string source;
  // The kernel moves registers between its warpgroups with setmaxnreg (a warp-specialised
  // spec): ptxas must have allocated the launch's full share, which compile_kernel checks.
  bool register_split = false;
};

// Validates the spec (throws Error(invalid_argument)) and assembles its source.
GeneratedSource generate_source(const KernelSpec& spec);

// The `struct Spec { static constexpr ... }` of the spec's constants that the device traits
// (templates/params/kernel_traits.cuh) read; part of generate_source's text.
std::string spec_struct(const KernelSpec& spec);

}  // namespace flashgen
