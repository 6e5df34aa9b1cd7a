#include "compiler/spec_fields.h"

namespace flashgen {

std::string one_of(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

namespace {

// The values of the fields `for_each` visits, as integers in their order.
template <size_t N, typename Object, typename ForEach>
std::array<long long, N> values_of(const Object& object, ForEach for_each) {
  std::array<long long, N> out{};
  size_t i = 0;
  for_each([&](const auto& field) { out[i++] = static_cast<long long>(object.*field.member); });
  return out;
}

}  // namespace

std::array<long long, kSpecFieldCount> spec_field_values(const KernelSpec& spec) {
  return values_of<kSpecFieldCount>(spec, [](auto&& f) { for_each_spec_field(f); });
}

std::array<long long, kProblemFieldCount> problem_field_values(const ProblemOptions& options) {
  return values_of<kProblemFieldCount>(options, [](auto&& f) { for_each_problem_field(f); });
}

bool same_but_tiles(const KernelSpec& a, const KernelSpec& b) {
  bool same = true;
  for_each_spec_field([&](const auto& field) {
    if (field.role != FieldRole::tile) same = same && a.*field.member == b.*field.member;
  });
  return same;
}

std::string describe(const ProblemOptions& options) {
  std::string out;
  for_each_problem_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    const T value = options.*field.member;
    std::string part;
    if constexpr (std::is_same_v<T, bool>)
      part = value ? field.name : "";
    else if constexpr (std::is_enum_v<T>)
      part = field_text(value);
    else
      part = std::string(field.name) + " " + field_text(value);
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  });
  return out;
}

std::vector<DeviceConstant> device_constants(const KernelSpec& spec) {
  std::vector<DeviceConstant> out;
  for_each_spec_field([&](const auto& field) {
    if (field.device == nullptr) return;
    using T = typename std::decay_t<decltype(field)>::value_type;
    const T value = spec.*field.member;
    if constexpr (std::is_enum_v<T>) {
      if constexpr (requires { EnumSpelling<T>::device_value(value); })
        out.push_back({field.device, EnumSpelling<T>::device_type(), EnumSpelling<T>::device_value(value),
                       EnumSpelling<T>::device_doc()});
    } else {
      out.push_back({field.device, std::is_same_v<T, bool> ? "bool" : "int", field_text(value), field.doc});
    }
  });
  return out;
}

}  // namespace flashgen
