#include "runtime/kernel_json.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "compiler/spec_fields.h"

namespace flashgen {

nlohmann::json spec_to_json(const KernelSpec& spec) {
  nlohmann::json j = {{"uri", spec.uri()}, {"dynamic_shared_bytes", spec.shared_memory_bytes()}};
  for_each_spec_field([&](const auto& field) {
    const auto value = spec.*field.member;
    if constexpr (std::is_enum_v<std::decay_t<decltype(value)>>)
      j[field.name] = field_text(value);
    else
      j[field.name] = value;
  });
  return j;
}

std::optional<KernelSpec> spec_from_json(const nlohmann::json& j, std::string& problem, KernelSpec spec) {
  if (!j.is_object()) {
    problem = "a kernel spec is not a JSON object";
    return std::nullopt;
  }
  bool ok = true;
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    const auto it = j.find(field.name);
    if (!ok || it == j.end()) return;  // missing: the base's value (files older than the field)
    std::optional<T> value;
    if constexpr (std::is_enum_v<T>) {
      if (it->is_string()) value = EnumSpelling<T>::parse(it->template get<std::string>());
    } else if constexpr (std::is_same_v<T, bool>) {
      if (it->is_boolean()) value = it->template get<bool>();
    } else {
      if (it->is_number_integer()) value = it->template get<T>();
    }
    if (!value) {
      problem = fmt::format("\"{}\" is {}, expected {}", field.name, it->dump(), expected_value<T>());
      ok = false;
      return;
    }
    spec.*field.member = *value;
  });
  if (!ok) return std::nullopt;
  return spec;
}

nlohmann::json resources_to_json(const KernelResources& r) {
  return {
      {"registers", r.registers},         {"static_shared_bytes", r.shared_bytes},
      {"stack_bytes", r.stack_bytes},     {"spill_stores_bytes", r.spill_stores},
      {"spill_loads_bytes", r.spill_loads}, {"constant_bytes", r.constant_bytes},
      {"barriers", r.barriers},
  };
}

KernelResources resources_from_json(const nlohmann::json& j) {
  KernelResources r;
  r.registers = j.value("registers", 0);
  r.shared_bytes = j.value("static_shared_bytes", 0);
  r.stack_bytes = j.value("stack_bytes", 0);
  r.spill_stores = j.value("spill_stores_bytes", 0);
  r.spill_loads = j.value("spill_loads_bytes", 0);
  r.constant_bytes = j.value("constant_bytes", 0);
  r.barriers = j.value("barriers", 0);
  return r;
}

std::string checksum_hex(std::string_view bytes) {
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

}  // namespace flashgen
