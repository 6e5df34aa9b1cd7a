// Reading back what the schedule SVG draws: its <rect> elements by attribute, and
// whether its tags nest properly. Header-only test helper.
#pragma once

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace flashgen::test {

// One <rect>'s attributes.
using SvgAttributes = std::map<std::string, std::string>;

inline std::vector<SvgAttributes> svg_rects(const std::string& svg) {
  static const std::regex attribute(R"re(([\w-]+)="([^"]*)")re");
  std::vector<SvgAttributes> rects;
  for (size_t at = svg.find("<rect "); at != std::string::npos; at = svg.find("<rect ", at + 1)) {
    const std::string tag = svg.substr(at, svg.find('>', at) - at);
    SvgAttributes a;
    for (std::sregex_iterator it(tag.begin(), tag.end(), attribute), end; it != end; ++it) a[(*it)[1]] = (*it)[2];
    rects.push_back(std::move(a));
  }
  return rects;
}

// Counts of rects with class `cls_prefix + X`, by (data-pass, X): "tile " gives tile states.
inline std::map<std::pair<std::string, std::string>, int> count_by_pass(const std::vector<SvgAttributes>& rects,
                                                                        const std::string& cls_prefix) {
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const SvgAttributes& r : rects) {
    const auto cls = r.find("class");
    if (cls == r.end() || cls->second.rfind(cls_prefix, 0) != 0) continue;
    const auto pass = r.find("data-pass");
    counts[{pass == r.end() ? "" : pass->second, cls->second.substr(cls_prefix.size())}]++;
  }
  return counts;
}

// The first tag that does not nest (or that stays open), or nothing when every tag closes in order.
inline std::optional<std::string> unbalanced_tag(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const size_t end = svg.find('>', at);
    if (end == std::string::npos) return svg.substr(at, 40);
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.empty() || tag[0] == '?' || tag[0] == '!' || tag.back() == '/') continue;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "</" + tag.substr(1) + ">";
      open.pop_back();
    } else {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return std::nullopt;
}

}  // namespace flashgen::test
