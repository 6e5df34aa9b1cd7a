#include "tools/flashgen/spec_options.h"

#include <fmt/format.h>

#include <charconv>

#include "compiler/spec_fields.h"

namespace flashgen::cli {

void SpecOptions::add_to(CLI::App& cmd, const KernelSpec& defaults) {
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    std::string help = field.doc;
    CLI::Option* option = nullptr;
    if constexpr (std::is_same_v<T, bool>) {
      if (field.cli_value)
        option = cmd.add_option(field.cli, text_[field.name], help)->type_name(field.cli_value);
      else
        option = cmd.add_flag(field.cli, flag_[field.name], help);
    } else {
      std::string& text = text_[field.name];
      if constexpr (std::is_enum_v<T>) help += ": " + enum_values<T>();
      if (field.role == FieldRole::tile) {
        option = cmd.add_option(field.cli, text, help + " (default: the spec's, or with --pass all the selection's)");
      } else {
        text = field_text(defaults.*field.member);
        option = cmd.add_option(field.cli, text, help)->capture_default_str();
      }
      option->type_name(std::is_enum_v<T> ? "TEXT" : "INT");
    }
    option_[field.name] = option;
  });
}

KernelSpec SpecOptions::spec(const KernelSpec& defaults, std::string_view skip) const {
  KernelSpec s = defaults;
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    if (field.name == skip) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (given(field.name)) s.*field.member = true;
      return;
    } else {
      const std::string& text = value(field.name);
      if (text.empty()) return;  // a tile left to the selection
      std::optional<T> parsed;
      if constexpr (std::is_enum_v<T>) {
        parsed = EnumSpelling<T>::parse(text);
      } else {
        T v{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc() && end == text.data() + text.size()) parsed = v;
      }
      if (!parsed)
        throw Error(Status::invalid_argument,
                    fmt::format("{}: got '{}', expected {}", field.cli, text, expected_value<T>()));
      s.*field.member = *parsed;
    }
  });
  return s;
}

bool SpecOptions::given(std::string_view field) const { return option(field)->count() > 0; }

const std::string& SpecOptions::value(std::string_view field) const {
  static const std::string none;
  const auto it = text_.find(field);
  return it == text_.end() ? none : it->second;
}

bool SpecOptions::tiles_given() const {
  bool any = false;
  for_each_spec_field([&](const auto& field) { any = any || (field.role == FieldRole::tile && given(field.name)); });
  return any;
}

CLI::Option* SpecOptions::option(std::string_view field) const {
  const auto it = option_.find(field);
  if (it == option_.end()) throw Error(Status::internal, fmt::format("no `flashgen dump` option for '{}'", field));
  return it->second;
}

}  // namespace flashgen::cli
