// Placeholder until its owner lands the implementation.
#include "runtime/nvrtc_compiler.h"
namespace flashgen {
std::vector<std::string> nvrtc_options(Arch, const CompileOptions&) { return {}; }
std::string nvrtc_version() { return "?"; }
CompiledKernel compile_kernel(const KernelSpec& spec, const CompileOptions&) { throw Error(Status::unsupported, "nvrtc: not yet available for " + spec.uri()); }
KernelResources parse_ptxas_report(const std::string&) { return {}; }
}  // namespace flashgen
