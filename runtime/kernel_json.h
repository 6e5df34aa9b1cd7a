// JSON forms of a kernel's spec and resources, shared by the cache's meta.json,
// the FLASHGEN_DUMP_DIR dump and `flashgen dump --emit resources`.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "compiler/kernel_spec.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen {

// Every field of compiler/spec_fields.h under its name (enums spelled), plus "uri" and
// "dynamic_shared_bytes".
nlohmann::json spec_to_json(const KernelSpec& spec);
// The spec a spec_to_json object describes; a field it lacks keeps `base`'s value. nullopt
// (with `problem` naming the field) when a field has the wrong type or an unknown value.
std::optional<KernelSpec> spec_from_json(const nlohmann::json& j, std::string& problem, KernelSpec base = {});
nlohmann::json resources_to_json(const KernelResources& r);
// Missing fields read as 0.
KernelResources resources_from_json(const nlohmann::json& j);

// XXH3-64 of bytes as 16 hex digits: the cubin checksum recorded in meta.json.
std::string checksum_hex(std::string_view bytes);

}  // namespace flashgen
