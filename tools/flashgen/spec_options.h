// The KernelSpec options of `flashgen dump`: one per field of compiler/spec_fields.h,
// named, documented and parsed from the table (--head-dim, --block-m, --causal, ...).
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <string_view>

#include "compiler/kernel_spec.h"

namespace flashgen::cli {

class SpecOptions {
 public:
  // Adds the options to `cmd`. Tile fields have no default (the selection's choice); the
  // others show `defaults`' value.
  void add_to(CLI::App& cmd, const KernelSpec& defaults);

  // `defaults` with the given options applied. Throws Error(invalid_argument) naming the
  // option for a value it cannot parse. A flag with a launch value (--window L,R) is set
  // when given; its value is left to the caller (value()). `skip`: a field the caller sets.
  KernelSpec spec(const KernelSpec& defaults, std::string_view skip = {}) const;

  bool given(std::string_view field) const;
  // The text of a field's option (its default when not given; empty for tiles).
  const std::string& value(std::string_view field) const;
  // True when any tile field (block_m, block_n, warps, stages) was given.
  bool tiles_given() const;
  CLI::Option* option(std::string_view field) const;

 private:
  std::map<std::string, std::string, std::less<>> text_;
  std::map<std::string, bool, std::less<>> flag_;
  std::map<std::string, CLI::Option*, std::less<>> option_;
};

}  // namespace flashgen::cli
