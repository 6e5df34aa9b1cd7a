// An NVRTC release, "13.0": the loaded library's (runtime/nvrtc_library.h), and the one a
// package's kernel set was compiled with; NVRTC's option list and the cache key depend on it.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace flashgen {

struct NvrtcVersion {
  int major = 0, minor = 0;
  std::string str() const;  // "13.0"
  // "13.0" -> {13, 0}; nullopt for anything else.
  static std::optional<NvrtcVersion> parse(std::string_view text);
  friend bool operator==(const NvrtcVersion&, const NvrtcVersion&) = default;
  friend auto operator<=>(const NvrtcVersion&, const NvrtcVersion&) = default;
};

}  // namespace flashgen
