#include "runtime/nvrtc_version.h"

#include <fmt/format.h>

#include <charconv>

namespace flashgen {

std::string NvrtcVersion::str() const { return fmt::format("{}.{}", major, minor); }

std::optional<NvrtcVersion> NvrtcVersion::parse(std::string_view text) {
  const auto number = [](std::string_view digits, int& out) {
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
    return std::from_chars(digits.data(), digits.data() + digits.size(), out).ec == std::errc();
  };
  const size_t dot = text.find('.');
  NvrtcVersion v;
  if (dot == std::string_view::npos || !number(text.substr(0, dot), v.major) || !number(text.substr(dot + 1), v.minor))
    return std::nullopt;
  return v;
}

}  // namespace flashgen
