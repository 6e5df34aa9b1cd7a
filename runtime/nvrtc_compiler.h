// CUDA source -> cubin through NVRTC, with the ptxas resource report parsed.
#pragma once

#include <string>
#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

struct KernelResources {
  int registers = 0;
  int shared_bytes = 0;  // static shared memory ptxas reports (the kernels use dynamic)
  int stack_bytes = 0;
  int spill_stores = 0;
  int spill_loads = 0;
  int constant_bytes = 0;
};

struct CompiledKernel {
  KernelSpec spec;
  std::string kernel_name;
  std::string source;
  std::string cubin;  // bytes
  std::string ptx;    // only when asked for
  std::string log;    // NVRTC + ptxas log
  KernelResources resources;
  double compile_ms = 0;
  bool from_disk_cache = false;
};

struct CompileOptions {
  bool keep_ptx = false;
  std::vector<std::string> extra_flags;  // from the environment registry (cache-invalidating)
};

// The exact NVRTC option list used for `arch` (part of the cache key).
std::vector<std::string> nvrtc_options(Arch arch, const CompileOptions& options);
// "13.0"
std::string nvrtc_version();

// Thread-safe. Throws Error(compile_error) carrying the URI and the full log.
CompiledKernel compile_kernel(const KernelSpec& spec, const CompileOptions& options = {});

// Parses ptxas -v output ("Used 96 registers, ...", "... bytes stack frame, N bytes spill stores").
KernelResources parse_ptxas_report(const std::string& log);

}  // namespace flashgen
