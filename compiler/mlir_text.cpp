#include "compiler/mlir_text.h"

#include <fmt/format.h>

namespace flashgen {

// MLIR's spelling of the element type (the dialect's dtype is a builtin type).
static const char* mlir_type(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
  }
  return "f32";
}

std::string mlir_kernel_body(const KernelSpec& spec) {
  std::string s =
      fmt::format("{} for {} {{head_dim = {}, dtype = {}, block_m = {}, block_n = {}, warps = {}, stages = {}",
                  to_string(spec.pass), to_string(spec.arch), spec.head_dim, mlir_type(spec.dtype), spec.block_m,
                  spec.block_n, spec.warps, spec.stages);
  if (spec.causal) s += ", causal";
  if (spec.window) s += ", window";
  if (spec.softcap) s += ", softcap";
  if (spec.deterministic) s += ", deterministic";
  s += "}";
  return s;
}

std::string mlir_kernel(const KernelSpec& spec) {
  return fmt::format("flash.kernel @{} {}", spec.uri(), mlir_kernel_body(spec));
}

std::string mlir_module(const std::vector<KernelSpec>& specs) {
  std::string s = "module {\n";
  for (const KernelSpec& spec : specs) s += "  " + mlir_kernel(spec) + "\n";
  s += "}\n\n";
  return s;
}

}  // namespace flashgen
