#include "runtime/environment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <sstream>

extern char** environ;

namespace flashgen {

namespace {

constexpr EnvVar kRegistry[] = {
    {"FLASHGEN_CACHE_DIR", EnvEffect::neutral,
     "$XDG_CACHE_HOME/flashgen, else ~/.cache/flashgen, else (no HOME) $TMPDIR/flashgen-cache-<uid>",
     "directory of the on-disk kernel cache; created 0700, used only if it is this user's (or root's), "
     "not a symbolic link and not writable by group or others"},
    {"FLASHGEN_CACHE_READ_DIRS", EnvEffect::neutral, "(unset)",
     "read-only kernel cache directories (warmed ones: an image's, a shared volume), separated by ':', searched "
     "for a kernel the cache directory lacks before it is compiled; never written; each used only if it is this "
     "user's or root's, not a symbolic link and not writable by group or others"},
    {"FLASHGEN_PACKAGED_KERNELS", EnvEffect::neutral, "(unset)",
     "the kernel set a package ships (the pip-installed `flashgen` command passes the wheel's flashgen/kernels): "
     "one warmed directory per NVRTC release, nvrtc-<major>.<minor>, searched first and loaded without NVRTC; never "
     "written"},
    {"FLASHGEN_SUBSTITUTE_KERNELS", EnvEffect::neutral, "(unset)",
     "1/true/on/yes: while a variant's own kernels compile, run its dense calls on the next head-dim class's "
     "kernels (64, 128, 256) over zero-padded copies; 0/false/off/no: wait for the compile; unset: "
     "RuntimeOptions::substitute_while_compiling"},
    {"FLASHGEN_DISABLE_DISK_CACHE", EnvEffect::neutral, "0",
     "1/true/on/yes: keep compiled kernels in memory only (no reads or writes of the cache directory); "
     "0/false/off/no: use it (any case)"},
    {"FLASHGEN_CACHE_LOCK_TIMEOUT", EnvEffect::neutral, "60",
     "seconds to wait for another process compiling the same kernel before compiling it in memory "
     "(0: do not wait)"},
    {"FLASHGEN_DUMP_DIR", EnvEffect::neutral, "(unset)",
     "write every kernel compiled (source, PTX, cubin, log, resources) to this directory"},
    {"FLASHGEN_NVRTC", EnvEffect::neutral, "(unset)",
     "path of the libnvrtc.so to compile with, the only one tried; unset: the pip wheels next to the Python "
     "package, $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, the system library path "
     "(NVRTC 12.4+ or 13.x; its version is part of the cache key)"},
    {"FLASHGEN_NVRTC_PATHS", EnvEffect::neutral, "(unset)",
     "libnvrtc files, separated by ':', tried (when FLASHGEN_NVRTC is unset) before $CUDA_HOME: the pip wheels' "
     "NVRTC as the pip-installed `flashgen` command passes them to the CLI"},
    {"FLASHGEN_NVRTC_FLAGS", EnvEffect::invalidates_cache, "(unset)",
     "extra NVRTC options, separated by spaces, appended to every compile"},
    {"FLASHGEN_AUTOTUNE", EnvEffect::neutral, "cached",
     "autotuning policy: off | cached | startup | full"},
    {"FLASHGEN_LOG_LEVEL", EnvEffect::neutral, "warning",
     "lowest level printed by the default log sink: debug | info | warning | error"},
    {"FLASHGEN_LIBRARY", EnvEffect::neutral, "(unset)",
     "path of libflashgen.so for the Python package (read by python/flashgen, not by the runtime)"},
};

const EnvVar& registered(std::string_view name) {
  for (const EnvVar& v : kRegistry)
    if (name == v.name) return v;
  throw Error(Status::internal, fmt::format("environment variable {} is not in the registry (runtime/environment.cpp)", name));
}

// getenv for names outside the FLASHGEN_ registry (HOME, XDG_CACHE_HOME): kept here too.
std::optional<std::string> raw_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

std::span<const EnvVar> environment_variables() { return kRegistry; }

std::optional<std::string> env_value(std::string_view name) { return raw_env(registered(name).name); }

namespace {

// Registered variable `name` split on ':', empty entries dropped; none when unset.
std::vector<std::string> colon_list_from_env(std::string_view name) {
  std::vector<std::string> parts;
  const std::optional<std::string> value = env_value(name);
  if (!value) return parts;
  std::size_t start = 0;
  while (start <= value->size()) {
    const std::size_t end = std::min(value->find(':', start), value->size());
    if (end > start) parts.push_back(value->substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

std::string cache_invalidating_environment() {
  std::string out;
  for (const EnvVar& v : kRegistry)
    if (v.effect == EnvEffect::invalidates_cache)
      if (auto value = raw_env(v.name)) out += fmt::format("{}={}\n", v.name, *value);
  return out;
}

std::vector<std::string> unknown_flashgen_variables() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with("FLASHGEN_")) continue;
    std::string_view name = entry.substr(0, entry.find('='));
    const bool known =
        std::any_of(std::begin(kRegistry), std::end(kRegistry), [&](const EnvVar& v) { return name == v.name; });
    if (!known) out.emplace_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void warn_unknown_environment_once(const LogSink& log) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  const auto unknown = unknown_flashgen_variables();
  if (unknown.empty() || !log) return;
  std::string known;
  for (const EnvVar& v : kRegistry) known += fmt::format("{}{}", known.empty() ? "" : ", ", v.name);
  log(LogLevel::warning, fmt::format("ignoring unknown environment variable(s) {}; flashgen reads only {}",
                                     fmt::join(unknown, ", "), known));
}

std::filesystem::path cache_dir_from_env() {
  if (auto dir = env_value("FLASHGEN_CACHE_DIR")) return *dir;
  if (auto xdg = raw_env("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "flashgen";
  if (auto home = raw_env("HOME")) return std::filesystem::path(*home) / ".cache" / "flashgen";
  // The temp dir is shared by every user: one directory per user, created 0700 (and
  // refused if someone else made it first).
  return std::filesystem::temp_directory_path() / fmt::format("flashgen-cache-{}", ::geteuid());
}

std::vector<std::filesystem::path> cache_read_dirs_from_env() {
  std::vector<std::filesystem::path> dirs;
  for (std::string& dir : colon_list_from_env("FLASHGEN_CACHE_READ_DIRS")) dirs.emplace_back(std::move(dir));
  return dirs;
}

std::filesystem::path packaged_kernels_from_env() {
  if (auto dir = env_value("FLASHGEN_PACKAGED_KERNELS")) return std::filesystem::path(*dir);
  return {};
}

std::optional<std::filesystem::path> dump_dir_from_env() {
  if (auto dir = env_value("FLASHGEN_DUMP_DIR")) return std::filesystem::path(*dir);
  return std::nullopt;
}

std::vector<std::string> nvrtc_flags_from_env() {
  std::vector<std::string> flags;
  if (auto value = env_value("FLASHGEN_NVRTC_FLAGS")) {
    std::istringstream in(*value);
    for (std::string flag; in >> flag;) flags.push_back(flag);
  }
  return flags;
}

std::optional<std::string> nvrtc_path_from_env() { return env_value("FLASHGEN_NVRTC"); }

std::vector<std::string> nvrtc_paths_from_env() { return colon_list_from_env("FLASHGEN_NVRTC_PATHS"); }

std::optional<std::string> cuda_toolkit_dir_from_env(std::string_view name) {
  if (name != "CUDA_HOME" && name != "CUDA_PATH")
    throw Error(Status::internal, fmt::format("{} is not a CUDA toolkit variable (CUDA_HOME, CUDA_PATH)", name));
  return raw_env(std::string(name).c_str());
}

std::optional<AutotunePolicy> autotune_policy_from_env() {
  auto value = env_value("FLASHGEN_AUTOTUNE");
  if (!value) return std::nullopt;
  if (*value == "off") return AutotunePolicy::off;
  if (*value == "cached") return AutotunePolicy::cached;
  if (*value == "startup") return AutotunePolicy::startup;
  if (*value == "full") return AutotunePolicy::full;
  throw Error(Status::invalid_argument,
              fmt::format("FLASHGEN_AUTOTUNE: got '{}', expected off, cached, startup or full", *value));
}

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "?";
}

LogLevel log_level_from_env() {
  auto value = env_value("FLASHGEN_LOG_LEVEL");
  if (!value) return LogLevel::warning;
  for (LogLevel level : {LogLevel::debug, LogLevel::info, LogLevel::warning, LogLevel::error})
    if (*value == to_string(level)) return level;
  throw Error(Status::invalid_argument,
              fmt::format("FLASHGEN_LOG_LEVEL: got '{}', expected debug, info, warning or error", *value));
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"1", "true", "on", "yes"})
    if (lower == yes) return true;
  for (const char* no : {"0", "false", "off", "no"})
    if (lower == no) return false;
  return std::nullopt;
}

std::optional<bool> env_flag(std::string_view name) {
  auto value = env_value(name);
  if (!value) return std::nullopt;
  if (auto b = parse_bool(*value)) return b;
  throw Error(Status::invalid_argument,
              fmt::format("{}: got '{}', expected 1, 0, true, false, on, off, yes or no (any case)", name, *value));
}

bool disk_cache_disabled_by_env() { return env_flag("FLASHGEN_DISABLE_DISK_CACHE").value_or(false); }

std::chrono::milliseconds cache_lock_timeout_from_env() {
  constexpr double kMaxSeconds = 24 * 3600;
  auto value = env_value("FLASHGEN_CACHE_LOCK_TIMEOUT");
  if (!value) return std::chrono::seconds(60);
  double seconds = -1;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, seconds);
  if (ec != std::errc() || ptr != end || !(seconds >= 0 && seconds <= kMaxSeconds))
    throw Error(Status::invalid_argument,
                fmt::format("FLASHGEN_CACHE_LOCK_TIMEOUT: got '{}', expected a number of seconds from 0 to {}",
                            *value, kMaxSeconds));
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::vector<std::string> environment_problems() {
  std::vector<std::string> problems;
  const auto check = [&](auto reader) {
    try {
      reader();
    } catch (const Error& e) {
      problems.emplace_back(e.what());
    }
  };
  check(disk_cache_disabled_by_env);
  check([] { return env_flag("FLASHGEN_SUBSTITUTE_KERNELS"); });
  check(autotune_policy_from_env);
  check(log_level_from_env);
  check(cache_lock_timeout_from_env);
  return problems;
}

void validate_environment() {
  const auto problems = environment_problems();
  if (!problems.empty()) throw Error(Status::invalid_argument, fmt::format("{}", fmt::join(problems, "; ")));
}

std::vector<std::filesystem::path> tool_search_path() {
  std::vector<std::filesystem::path> dirs;
  if (auto path = raw_env("PATH")) {
    std::istringstream in(*path);
    for (std::string dir; std::getline(in, dir, ':');)
      if (!dir.empty()) dirs.emplace_back(dir);
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  return dirs;
}

LogSink default_log_sink() {
  const LogLevel threshold = log_level_from_env();
  return [threshold](LogLevel level, const std::string& message) {
    if (level >= threshold) std::cerr << "flashgen: " << to_string(level) << ": " << message << "\n";
  };
}

}  // namespace flashgen
