// The one registry of the environment variables flashgen reads. Every FLASHGEN_*
// knob is declared here once, marked cache-invalidating (its value changes the
// generated code or the compile, so it is part of the kernel cache key) or
// cache-neutral. Nothing else in flashgen calls getenv.
#pragma once

#include <chrono>
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

// Typed readers. Each parses strictly and throws Error(invalid_argument) naming the
// variable, its value and what is expected; validate_environment() runs them all.
// $FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen, else ~/.cache/flashgen, else (no
// home known) $TMPDIR/flashgen-cache-<uid>.
std::filesystem::path cache_dir_from_env();
// $FLASHGEN_CACHE_READ_DIRS split on ':' (empty parts skipped); none when unset.
std::vector<std::filesystem::path> cache_read_dirs_from_env();
// $FLASHGEN_PACKAGED_KERNELS; empty when unset.
std::filesystem::path packaged_kernels_from_env();
std::optional<std::filesystem::path> dump_dir_from_env();
// FLASHGEN_NVRTC_FLAGS split on whitespace.
std::vector<std::string> nvrtc_flags_from_env();
// FLASHGEN_NVRTC: the libnvrtc file to compile with (runtime/nvrtc_library.h searches the rest).
std::optional<std::string> nvrtc_path_from_env();
// FLASHGEN_NVRTC_PATHS split on ':' (empty entries dropped): more libnvrtc files to try.
std::vector<std::string> nvrtc_paths_from_env();
// $CUDA_HOME or $CUDA_PATH (`name`): a CUDA toolkit's root, where NVRTC is looked for.
std::optional<std::string> cuda_toolkit_dir_from_env(std::string_view name);
// FLASHGEN_AUTOTUNE: off|cached|startup|full.
std::optional<AutotunePolicy> autotune_policy_from_env();
// FLASHGEN_LOG_LEVEL: debug|info|warning|error, default warning.
LogLevel log_level_from_env();
// FLASHGEN_DISABLE_DISK_CACHE as a boolean (env_flag), default false.
bool disk_cache_disabled_by_env();
// FLASHGEN_CACHE_LOCK_TIMEOUT: seconds (fractions allowed) from 0 to a day, default 60.
std::chrono::milliseconds cache_lock_timeout_from_env();

// The one boolean syntax of every FLASHGEN_* switch: 1/0, true/false, on/off, yes/no in
// any case; nullopt for anything else.
std::optional<bool> parse_bool(std::string_view text);
// A registered boolean variable: nullopt when unset; throws Error(invalid_argument) for a bad value.
std::optional<bool> env_flag(std::string_view name);

// What is wrong with the FLASHGEN_* values set (one message per bad variable), and the
// same as one Error(invalid_argument): the runtime and every CLI command start with it,
// so a bad value fails the same way everywhere.
std::vector<std::string> environment_problems();
void validate_environment();

// The directories of $PATH, then the CUDA toolkit's bin directory: where `flashgen dump`
// looks for nvdisasm/cuobjdump.
std::vector<std::filesystem::path> tool_search_path();

// The sink used when the caller gives none: messages at or above FLASHGEN_LOG_LEVEL to stderr.
LogSink default_log_sink();
const char* to_string(LogLevel level);

}  // namespace flashgen
