#include "runtime/nvrtc_compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <memory>

#include "compiler/embedded_files.h"
#include "runtime/environment.h"
#include "runtime/nvrtc_library.h"

namespace flashgen {

namespace {

// Owns one NVRTC program: programs are independent, which makes compiles thread-safe.
struct ProgramDeleter {
  const NvrtcLibrary* nv;
  void operator()(nvrtcProgram p) const { nv->nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

void check_nvrtc(const NvrtcLibrary& nv, nvrtcResult r, const char* what, const std::string& name,
                 const std::string& log = {}) {
  if (r == NVRTC_SUCCESS) return;
  throw Error(Status::compile_error, fmt::format("{}: NVRTC failed: {} returned {}{}{}", name, what,
                                                 nv.nvrtcGetErrorString(r), log.empty() ? "" : ":\n", log));
}

std::string program_log(const NvrtcLibrary& nv, nvrtcProgram p) {
  size_t size = 0;
  if (nv.nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nv.nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

// The device library (templates/) as NVRTC takes it: texts and the names sources include
// them by, NUL-terminated, built once per process.
struct DeviceHeaders {
  std::vector<std::string> texts, names;
  std::vector<const char*> text_ptrs, name_ptrs;
};

const DeviceHeaders& device_headers() {
  static const DeviceHeaders headers = [] {
    DeviceHeaders h;
    for (const EmbeddedFile& f : embedded_files()) {
      h.texts.emplace_back(f.text);
      h.names.emplace_back(f.name);
    }
    for (std::size_t i = 0; i < h.texts.size(); ++i) {
      h.text_ptrs.push_back(h.texts[i].c_str());
      h.name_ptrs.push_back(h.names[i].c_str());
    }
    return h;
  }();
  return headers;
}

}  // namespace

CompileOptions CompileOptions::from_environment(bool keep_ptx) {
  return CompileOptions{.keep_ptx = keep_ptx, .extra_flags = nvrtc_flags_from_env()};
}

NvrtcVersion loaded_nvrtc_version() {
  const NvrtcLibrary& nv = nvrtc_library();
  return {nv.major, nv.minor};
}

std::vector<std::string> nvrtc_options(Arch arch, const CompileOptions& options) {
  return nvrtc_options(arch, options, loaded_nvrtc_version());
}

std::vector<std::string> nvrtc_options(Arch arch, const CompileOptions& options, NvrtcVersion nv) {
  std::vector<std::string> out = {
      fmt::format("--gpu-architecture={}", to_string(arch)),
      "-std=c++17",
      "--ptxas-options=-v",  // the resource report (registers, spills, smem) lands in the log
      "-default-device",     // generated helpers need no __device__ annotation
      // No texture/surface types, device-runtime API or device-side launch in the front end
      // (the kernels use none): ~8 ms less front end per compile and byte-identical cubins (54
      // kernels of 14 problems, NVRTC 13.0 and 12.9; docs/perf-notes.md, "-minimal"). NVRTC
      // added it in 12.4, the oldest flashgen loads.
      "-minimal",
  };
  // NVRTC >= 12.9 may serve a compile from the driver's compute cache (~/.nv) when a
  // driver is installed: the ptxas report is then missing from the log. flashgen's own
  // cache is the cache; NVRTC always compiles. Older NVRTC has no such cache (nor the option).
  if (nv.major > 12 || (nv.major == 12 && nv.minor >= 9)) out.emplace_back("--no-cache");
  out.insert(out.end(), options.extra_flags.begin(), options.extra_flags.end());
  return out;
}

std::string nvrtc_version() { return loaded_nvrtc_version().str(); }

CompileOutput compile_source(const std::string& name, const std::string& source, Arch arch,
                             const CompileOptions& options, std::string_view entry) {
  const auto start = std::chrono::steady_clock::now();
  const NvrtcLibrary& nv = nvrtc_library();
  const DeviceHeaders& headers = device_headers();
  nvrtcProgram raw = nullptr;
  check_nvrtc(nv, nv.nvrtcCreateProgram(&raw, source.c_str(), (name + ".cu").c_str(), static_cast<int>(headers.texts.size()),
                                 headers.text_ptrs.data(), headers.name_ptrs.data()),
              "nvrtcCreateProgram", name);
  Program program(raw, ProgramDeleter{&nv});

  const std::vector<std::string> flags = nvrtc_options(arch, options);
  std::vector<const char*> argv;
  for (const std::string& f : flags) argv.push_back(f.c_str());

  CompileOutput out;
  const nvrtcResult compiled = nv.nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  out.log = program_log(nv, raw);
  if (compiled != NVRTC_SUCCESS)
    throw Error(Status::compile_error, fmt::format("{}: NVRTC failed:\n{}", name,
                                                   out.log.empty() ? nv.nvrtcGetErrorString(compiled) : out.log));

  size_t size = 0;
  check_nvrtc(nv, nv.nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize", name, out.log);
  out.cubin.resize(size);
  check_nvrtc(nv, nv.nvrtcGetCUBIN(raw, out.cubin.data()), "nvrtcGetCUBIN", name, out.log);
  if (options.keep_ptx) {
    // NVRTC 13 keeps the PTX it handed to ptxas even for a real (sm_XX) target.
    check_nvrtc(nv, nv.nvrtcGetPTXSize(raw, &size), "nvrtcGetPTXSize", name, out.log);
    out.ptx.resize(size);
    check_nvrtc(nv, nv.nvrtcGetPTX(raw, out.ptx.data()), "nvrtcGetPTX", name, out.log);
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  out.resources = parse_ptxas_report(out.log, entry);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

namespace {

// A warp-specialised kernel's setmaxnreg split moves the registers its launch allocates,
// 65,536 / threads rounded down to 8 per thread (arch/warpgroup.cuh, register_split_fits),
// which ptxas allocates when nothing else bounds it. Compiled with fewer (flags such as
// --maxrregcount or -Ofc=mid in FLASHGEN_NVRTC_FLAGS), its consumers' setmaxnreg.inc would
// wait forever: refuse the kernel instead of hanging the GPU.
int launch_registers(const KernelSpec& spec) { return 65536 / spec.threads() / 8 * 8; }

bool register_split_holds(const KernelSpec& spec, const GeneratedSource& source, const CompileOutput& out) {
  return !source.register_split || out.resources.registers == launch_registers(spec);
}

void check_register_split(const KernelSpec& spec, const GeneratedSource& source, const CompileOutput& out,
                          const CompileOptions& options) {
  if (register_split_holds(spec, source, out)) return;
  throw Error(Status::compile_error,
              fmt::format("{}: ptxas allocated {} registers per thread, but this warp-specialised kernel's "
                          "producer/consumer register split (setmaxnreg) needs the launch's full {} per thread "
                          "({} threads); launched, it would hang. Extra NVRTC flags: [{}] (FLASHGEN_NVRTC_FLAGS): "
                          "drop the ones that bound registers",
                          spec.uri(), out.resources.registers, launch_registers(spec), spec.threads(),
                          fmt::join(options.extra_flags, " ")));
}

// NVRTC's fast-compile mode (-Ofc=min|mid|max) halves compile time but may leave a
// warp-specialised kernel fewer registers than its split needs (at max: the d64 and d96 dK/dV
// kernels; docs/perf-notes.md, "-Ofc"): such a kernel is compiled again without it.
bool drop_fast_compile(CompileOptions& options) {
  const auto fast = [](const std::string& f) { return f.starts_with("-Ofc") || f.starts_with("--Ofast-compile"); };
  return std::erase_if(options.extra_flags, fast) > 0;
}

}  // namespace

CompiledKernel compile_kernel(const KernelSpec& spec, const GeneratedSource& source, const CompileOptions& options) {
  CompileOutput out = compile_source(spec.uri(), source.source, spec.arch, options, source.kernel_name);
  CompileOptions used = options;
  if (!register_split_holds(spec, source, out) && drop_fast_compile(used)) {
    CompileOutput full = compile_source(spec.uri(), source.source, spec.arch, used, source.kernel_name);
    full.log = fmt::format("flashgen: fast-compile mode left {} registers, fewer than the register split needs: "
                           "compiled again without it ({:.0f} ms)\n{}",
                           out.resources.registers, out.compile_ms, full.log);
    full.compile_ms += out.compile_ms;
    out = std::move(full);
  }
  check_register_split(spec, source, out, used);
  CompiledKernel k;
  k.spec = spec;
  k.kernel_name = source.kernel_name;
  k.source = source.source;
  k.cubin = std::move(out.cubin);
  k.ptx = std::move(out.ptx);
  k.log = std::move(out.log);
  k.resources = out.resources;
  k.compile_ms = out.compile_ms;
  return k;
}

CompiledKernel compile_kernel(const KernelSpec& spec, const CompileOptions& options) {
  return compile_kernel(spec, generate_source(spec), options);
}

}  // namespace flashgen
