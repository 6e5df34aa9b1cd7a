#include "compiler/mlir_text.h"

#include <fmt/format.h>

#include "compiler/spec_fields.h"

namespace flashgen {

// MLIR's spelling of the element type (the dialect's dtype is a builtin type).
static const char* mlir_type(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::i32: return "i32";
  }
  return "f32";
}

std::string mlir_kernel_body(const KernelSpec& spec) {
  std::string pass, arch, attributes;
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    const T value = spec.*field.member;
    std::string text;
    if constexpr (std::is_same_v<T, DType>)
      text = mlir_type(value);
    else
      text = field_text(value);
    if (field.mlir == MlirPlace::before_for) {
      pass = text;
    } else if (field.mlir == MlirPlace::after_for) {
      arch = text;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (value) attributes += fmt::format(", {}", field.name);  // a flag is present or absent
    } else {
      attributes += fmt::format(", {} = {}", field.name, text);
    }
  });
  return fmt::format("{} for {} {{{}}}", pass, arch, attributes.substr(2));
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
