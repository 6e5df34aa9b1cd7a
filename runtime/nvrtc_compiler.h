// CUDA source -> cubin through NVRTC, with the ptxas resource report parsed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/kernel_spec.h"
#include "runtime/nvrtc_version.h"

namespace flashgen {

struct KernelResources {
  int registers = 0;
  int shared_bytes = 0;  // static shared memory ptxas reports (the kernels use dynamic)
  int stack_bytes = 0;
  int spill_stores = 0;
  int spill_loads = 0;
  int constant_bytes = 0;
  int barriers = 0;
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

  // extra_flags = FLASHGEN_NVRTC_FLAGS.
  static CompileOptions from_environment(bool keep_ptx = false);
};

// What NVRTC produced for one program.
struct CompileOutput {
  std::string cubin;  // bytes
  std::string ptx;    // only when options.keep_ptx
  std::string log;    // NVRTC diagnostics + the ptxas -v report
  KernelResources resources;
  double compile_ms = 0;
};

// The exact NVRTC option list for `arch` with NVRTC `nvrtc` (part of the cache key).
std::vector<std::string> nvrtc_options(Arch arch, const CompileOptions& options, NvrtcVersion nvrtc);
// The same for the loaded NVRTC. Like everything below, throws the loader's Error(no_device)
// where no usable NVRTC is found (runtime/nvrtc_library.h).
std::vector<std::string> nvrtc_options(Arch arch, const CompileOptions& options);
// The loaded NVRTC's version, "13.0" (part of the cache key).
NvrtcVersion loaded_nvrtc_version();
std::string nvrtc_version();

// Compiles any CUDA source for `arch`; `name` names the program in diagnostics
// ("<name>: NVRTC failed:\n<log>") and `entry` selects whose resources are reported
// (empty: the worst case over every function). Thread-safe: each call owns its program.
// Throws Error(compile_error) carrying the name and the full log.
CompileOutput compile_source(const std::string& name, const std::string& source, Arch arch,
                             const CompileOptions& options = {}, std::string_view entry = {});

// generate_source(spec) (or the given source) compiled for spec.arch. Thread-safe.
// Throws Error(compile_error) carrying the URI and the full log.
CompiledKernel compile_kernel(const KernelSpec& spec, const CompileOptions& options = {});
CompiledKernel compile_kernel(const KernelSpec& spec, const GeneratedSource& source, const CompileOptions& options);

// Parses ptxas -v output ("Used 96 registers, ...", "... bytes stack frame, N bytes spill stores").
// With `function`, the report of that entry function; else the worst case (max) over all.
KernelResources parse_ptxas_report(const std::string& log, std::string_view function = {});

}  // namespace flashgen
