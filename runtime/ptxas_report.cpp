// parse_ptxas_report: the resource lines `ptxas -v` writes into the NVRTC log.
//
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 24 registers, used 1 barriers, 1024 bytes smem, 364 bytes cmem[0]
//
// Plain string scanning: the format is fixed and std::regex trips GCC 12's
// -Wmaybe-uninitialized under the sanitizer build.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "runtime/nvrtc_compiler.h"

namespace flashgen {

namespace {

// The decimal number that ends right before `at` in `line` (0 if none).
int number_ending_at(std::string_view line, size_t at) {
  size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  return begin == at ? 0 : std::stoi(std::string(line.substr(begin, at - begin)));
}

// The number right before the first `suffix` (e.g. " bytes stack frame"), 0 if absent.
int number_before(std::string_view line, std::string_view suffix) {
  const size_t at = line.find(suffix);
  return at == std::string_view::npos ? 0 : number_ending_at(line, at);
}

// The number right after `prefix` (e.g. "Used "), 0 if absent.
int number_after(std::string_view line, std::string_view prefix) {
  size_t at = line.find(prefix);
  if (at == std::string_view::npos) return 0;
  at += prefix.size();
  size_t end = at;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  return end == at ? 0 : std::stoi(std::string(line.substr(at, end - at)));
}

// The text after `prefix` up to `terminator` (or the end of the line); nullopt if absent.
std::optional<std::string> text_after(std::string_view line, std::string_view prefix, char terminator) {
  const size_t at = line.find(prefix);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + prefix.size());
  return std::string(rest.substr(0, rest.find(terminator)));
}

}  // namespace

KernelResources parse_ptxas_report(const std::string& log, std::string_view function) {
  std::map<std::string, KernelResources> by_function;
  std::string entry, properties;  // the function the next "Used"/"stack frame" line belongs to
  std::istringstream in(log);
  for (std::string text; std::getline(in, text);) {
    const std::string_view line(text);
    if (line.find("ptxas") == std::string_view::npos) continue;
    if (auto name = text_after(line, "Compiling entry function '", '\'')) {
      entry = properties = *name;
    } else if (auto props = text_after(line, "Function properties for ", ' ')) {
      properties = *props;
    } else if (line.find(" bytes stack frame") != std::string_view::npos) {
      KernelResources& r = by_function[properties];
      r.stack_bytes = number_before(line, " bytes stack frame");
      r.spill_stores = number_before(line, " bytes spill stores");
      r.spill_loads = number_before(line, " bytes spill loads");
    } else if (line.find("Used ") != std::string_view::npos && line.find(" registers") != std::string_view::npos) {
      KernelResources& r = by_function[entry];
      r.registers = number_after(line, "Used ");
      r.barriers = number_after(line, "used ");
      r.shared_bytes = number_before(line, " bytes smem");
      r.constant_bytes = 0;
      for (size_t at = line.find(" bytes cmem["); at != std::string_view::npos; at = line.find(" bytes cmem[", at + 1))
        r.constant_bytes += number_ending_at(line, at);
    }
  }

  if (!function.empty()) {
    auto it = by_function.find(std::string(function));
    return it == by_function.end() ? KernelResources{} : it->second;
  }
  KernelResources worst;
  for (const auto& [name, r] : by_function) {
    worst.registers = std::max(worst.registers, r.registers);
    worst.shared_bytes = std::max(worst.shared_bytes, r.shared_bytes);
    worst.stack_bytes = std::max(worst.stack_bytes, r.stack_bytes);
    worst.spill_stores = std::max(worst.spill_stores, r.spill_stores);
    worst.spill_loads = std::max(worst.spill_loads, r.spill_loads);
    worst.constant_bytes = std::max(worst.constant_bytes, r.constant_bytes);
    worst.barriers = std::max(worst.barriers, r.barriers);
  }
  return worst;
}

}  // namespace flashgen
