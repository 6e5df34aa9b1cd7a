// The one registry of the environment variables flashgen reads. Every FLASHGEN_*
// knob is declared here once, marked cache-invalidating (its value changes the
// generated code or the compile, so it is part of the kernel cache key) or
// cache-neutral. Nothing else in flashgen calls getenv.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen {

enum class EnvEffect { invalidates_cache, neutral };

struct EnvVar {
  const char* name;
  EnvEffect effect;
  const char* default_value;  // as printed by `flashgen cache env`
  const char* description;
};

// Every variable flashgen reads, in a stable order.
std::span<const EnvVar> environment_variables();

// The value of a registered variable; nullopt when unset or empty.
// Throws Error(internal) for a name missing from the registry (a programming error).
std::optional<std::string> env_value(std::string_view name);

// "NAME=value\n" for every cache-invalidating variable that is set, in registry order:
// the environment's part of the kernel cache key.
std::string cache_invalidating_environment();

// FLASHGEN_* variables set in this process that the registry does not know.
std::vector<std::string> unknown_flashgen_variables();
// Reports the unknown FLASHGEN_* variables through `log` (one warning listing them),
// only the first time it is called in a process.
void warn_unknown_environment_once(const LogSink& log);

// Typed readers.
// $FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen, else ~/.cache/flashgen
// (or a temp-dir path when no home is known).
std::filesystem::path cache_dir_from_env();
std::optional<std::filesystem::path> dump_dir_from_env();
// FLASHGEN_NVRTC_FLAGS split on whitespace.
std::vector<std::string> nvrtc_flags_from_env();
// FLASHGEN_AUTOTUNE; throws Error(invalid_argument) for a value other than off|cached|startup|full.
std::optional<AutotunePolicy> autotune_policy_from_env();
// FLASHGEN_LOG_LEVEL (debug|info|warning|error), default warning; an unknown value gives warning.
LogLevel log_level_from_env();
// FLASHGEN_DISABLE_DISK_CACHE set to anything but 0/false/off.
bool disk_cache_disabled_by_env();

// The directories of $PATH, then the CUDA toolkit's bin directory: where `flashgen dump`
// looks for nvdisasm/cuobjdump.
std::vector<std::filesystem::path> tool_search_path();

// The sink used when the caller gives none: messages at or above FLASHGEN_LOG_LEVEL to stderr.
LogSink default_log_sink();
const char* to_string(LogLevel level);

}  // namespace flashgen
