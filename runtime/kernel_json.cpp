#include "runtime/kernel_json.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace flashgen {

nlohmann::json spec_to_json(const KernelSpec& spec) {
  return {
      {"uri", spec.uri()},
      {"pass", to_string(spec.pass)},
      {"head_dim", spec.head_dim},
      {"dtype", to_string(spec.dtype)},
      {"block_m", spec.block_m},
      {"block_n", spec.block_n},
      {"warps", spec.warps},
      {"stages", spec.stages},
      {"causal", spec.causal},
      {"window", spec.window},
      {"softcap", spec.softcap},
      {"deterministic", spec.deterministic},
      {"arch", to_string(spec.arch)},
      {"dynamic_shared_bytes", spec.shared_memory_bytes()},
  };
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
