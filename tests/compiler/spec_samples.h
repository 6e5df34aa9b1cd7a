// Specs for the field-table tests, drawn by visiting the table (compiler/spec_fields.h):
// a new field is sampled, varied and gridded without editing the tests.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "compiler/kernel_selection.h"
#include "compiler/spec_fields.h"

namespace flashgen::testing_support {

// Integer values of the grid (three per field keep it near 300k specs).
inline const std::vector<int> kIntSamples = {16, 64, 128};

template <typename T>
std::vector<T> field_samples() {
  if constexpr (std::is_same_v<T, bool>)
    return {false, true};
  else if constexpr (std::is_same_v<T, DType>)
    return {DType::f16, DType::bf16, DType::f32};
  else if constexpr (std::is_enum_v<T>)
    return {EnumSpelling<T>::values().begin(), EnumSpelling<T>::values().end()};
  else
    return kIntSamples;
}

// Any value of every field (ints 1..300), legal or not.
inline KernelSpec random_spec(std::mt19937& rng) {
  KernelSpec s;
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    if constexpr (std::is_same_v<T, int>) {
      s.*field.member = std::uniform_int_distribution<int>(1, 300)(rng);
    } else {
      const std::vector<T> values = field_samples<T>();
      s.*field.member = values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
    }
  });
  return s;
}

// A spec KernelSpec::problems() accepts: integers drawn from powers of two.
inline KernelSpec random_valid_spec(std::mt19937& rng) {
  for (;;) {
    KernelSpec s = random_spec(rng);
    for_each_spec_field([&](const auto& field) {
      if constexpr (std::is_same_v<typename std::decay_t<decltype(field)>::value_type, int>)
        s.*field.member = 1 << std::uniform_int_distribution<int>(0, 7)(rng);
    });
    if (s.problems().empty()) return s;
  }
}

// s with one field changed to another value.
template <typename Field>
KernelSpec changed_field(KernelSpec s, const Field& field) {
  using T = typename Field::value_type;
  T& v = s.*field.member;
  if constexpr (std::is_same_v<T, bool>) {
    v = !v;
  } else if constexpr (std::is_enum_v<T>) {
    const std::vector<T> values = field_samples<T>();
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] == v) {
        v = values[(i + 1) % values.size()];
        return s;
      }
    v = values.front();
  } else {
    v += 1;
  }
  return s;
}

// Calls f(spec) for the product of every field's samples.
template <typename F>
void for_each_grid_spec(F&& f) {
  std::vector<KernelSpec> specs = {KernelSpec{}};
  for_each_spec_field([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    std::vector<KernelSpec> next;
    for (const KernelSpec& s : specs)
      for (T v : field_samples<T>()) {
        KernelSpec t = s;
        t.*field.member = v;
        next.push_back(t);
      }
    specs = std::move(next);
  });
  for (const KernelSpec& s : specs) f(s);
}

inline ProblemKey problem_key_of(const KernelSpec& s) {
  ProblemKey p;
  static_cast<ProblemOptions&>(p) = s;
  return p;
}

}  // namespace flashgen::testing_support
