// The one declaration of KernelSpec's fields. Every external form of a spec is
// derived from this table: the URI and the content hash (kernel_spec.cpp), the MLIR
// text (mlir_text.cpp) and the flash.kernel op's attributes (dialect/), the JSON of
// meta.json and autotune.json (runtime/kernel_json.cpp), the hash keys of the caches,
// the problem options of ProblemKey/TuningKey (ProblemOptions), the options of
// `flashgen dump` (tools/flashgen/spec_options.cpp) and the constants of the generated
// source (device_constants). Adding a field is one line here plus its meaning.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "compiler/kernel_spec.h"

namespace flashgen {

// What a field is to the code around it.
enum class FieldRole {
  pass,     // which kernel of a forward+backward variant
  problem,  // a code-changing option of the problem: a member of ProblemOptions
  tile,     // tiling, chosen by the selection or the tuner
  target,   // the GPU architecture
};

// Where a field sits in the MLIR text `<pass> for <arch> {head_dim = 128, ..., causal}`.
enum class MlirPlace { before_for, after_for, attribute };

template <typename Owner, typename T>
struct SpecField {
  using owner_type = Owner;
  using value_type = T;
  T Owner::*member;
  const char* name;  // JSON key and MLIR attribute
  FieldRole role;
  const char* uri;       // URI text before the value; a flag's text when it is set
  const char* hash_key;  // key in KernelSpec::hash()'s canonical text (kept from before the table)
  const char* cli;       // `flashgen dump` option
  const char* doc;       // one line: the option's help and the device constant's comment
  const char* device = nullptr;     // constant of the generated source; nullptr: none
  const char* cli_value = nullptr;  // a flag whose option takes its launch parameter: its form ("L,R")
  MlirPlace mlir = MlirPlace::attribute;
  // A flag added after the hash's canonical text was fixed: it enters that text only when
  // set, so that the hashes of every kernel without it (cache entries, tuning sets) stay valid.
  bool hashed_when_set = false;
};

// Spelling of the values of an enum field.
template <typename E>
struct EnumSpelling;
template <>
struct EnumSpelling<Pass> {
  static constexpr const char* what = "kernel pass";
  static std::span<const Pass> values() { return kAllPasses; }
  static const char* print(Pass p) { return to_string(p); }
  static std::optional<Pass> parse(std::string_view s) { return parse_pass(s); }
};
template <>
struct EnumSpelling<DType> {
  static constexpr const char* what = "dtype";
  static std::span<const DType> values() {
    static constexpr DType kernel_dtypes[] = {DType::f16, DType::bf16};  // fp32 runs on the CPU only
    return kernel_dtypes;
  }
  static const char* print(DType t) { return to_string(t); }
  static std::optional<DType> parse(std::string_view s) { return parse_dtype(s); }
  // The generated source knows the dtype as kIsBf16.
  static const char* device_type() { return "bool"; }
  static std::string device_value(DType t) { return t == DType::bf16 ? "true" : "false"; }
  static const char* device_doc() { return "bf16 (else fp16) inputs"; }
};
template <>
struct EnumSpelling<Arch> {
  static constexpr const char* what = "arch";
  static std::span<const Arch> values() { return kAllArchs; }
  static const char* print(Arch a) { return to_string(a); }
  static std::optional<Arch> parse(std::string_view s) { return parse_arch(s); }
};

// Calls f(field) for every field in the order of the URI and the MLIR text.
template <typename F>
constexpr void for_each_spec_field(F&& f) {
  using K = KernelSpec;
  using P = ProblemOptions;
  f(SpecField<K, Pass>{.member = &K::pass, .name = "pass", .role = FieldRole::pass, .uri = "", .hash_key = "pass",
                       .cli = "--pass", .doc = "which kernel of the variant", .mlir = MlirPlace::before_for});
  f(SpecField<P, int>{.member = &P::head_dim, .name = "head_dim", .role = FieldRole::problem, .uri = "_d",
                      .hash_key = "d", .cli = "--head-dim", .doc = "the problem's head dim (1..256)",
                      .device = "kHeadDim"});
  f(SpecField<P, DType>{.member = &P::dtype, .name = "dtype", .role = FieldRole::problem, .uri = "_",
                        .hash_key = "dtype", .cli = "--dtype", .doc = "element type of q, k, v",
                        .device = "kIsBf16"});
  f(SpecField<K, int>{.member = &K::block_m, .name = "block_m", .role = FieldRole::tile, .uri = "_m",
                      .hash_key = "bm", .cli = "--block-m", .doc = "query rows per tile", .device = "kBlockM"});
  f(SpecField<K, int>{.member = &K::block_n, .name = "block_n", .role = FieldRole::tile, .uri = "n",
                      .hash_key = "bn", .cli = "--block-n", .doc = "key rows per tile", .device = "kBlockN"});
  f(SpecField<K, int>{.member = &K::warps, .name = "warps", .role = FieldRole::tile, .uri = "_w", .hash_key = "w",
                      .cli = "--warps", .doc = "warps per CTA", .device = "kWarps"});
  f(SpecField<K, int>{.member = &K::stages, .name = "stages", .role = FieldRole::tile, .uri = "s", .hash_key = "s",
                      .cli = "--stages", .doc = "pipeline depth of the streamed tiles", .device = "kStages"});
  f(SpecField<P, bool>{.member = &P::causal, .name = "causal", .role = FieldRole::problem, .uri = "_causal",
                       .hash_key = "causal", .cli = "--causal", .doc = "causal mask (bottom-right aligned)",
                       .device = "kCausal"});
  f(SpecField<P, bool>{.member = &P::window, .name = "window", .role = FieldRole::problem, .uri = "_window",
                       .hash_key = "window", .cli = "--window",
                       .doc = "sliding window (the sizes are launch parameters)", .device = "kWindow",
                       .cli_value = "L,R"});
  f(SpecField<P, bool>{.member = &P::softcap, .name = "softcap", .role = FieldRole::problem, .uri = "_softcap",
                       .hash_key = "softcap", .cli = "--softcap",
                       .doc = "soft-capped logits (the cap is a launch parameter)", .device = "kSoftcap",
                       .cli_value = "CAP"});
  f(SpecField<P, bool>{.member = &P::deterministic, .name = "deterministic", .role = FieldRole::problem,
                       .uri = "_det", .hash_key = "det", .cli = "--deterministic",
                       .doc = "deterministic backward: dQ without atomics", .device = "kDeterministic"});
  f(SpecField<P, bool>{.member = &P::paged, .name = "paged", .role = FieldRole::problem, .uri = "_paged",
                       .hash_key = "paged", .cli = "--paged",
                       .doc = "paged K/V cache read through a block table (split-KV forward; the page size is a "
                              "launch parameter)",
                       .device = "kPaged", .hashed_when_set = true});
  f(SpecField<P, bool>{.member = &P::varlen, .name = "varlen", .role = FieldRole::problem, .uri = "_varlen",
                       .hash_key = "varlen", .cli = "--varlen",
                       .doc = "packed variable-length sequences: per-sequence offsets and lengths read from "
                              "cu_seqlens (launch parameters)",
                       .device = "kVarlen", .hashed_when_set = true});
  f(SpecField<K, bool>{.member = &K::persistent, .name = "persistent", .role = FieldRole::tile,
                       .uri = "_persistent", .hash_key = "persistent", .cli = "--persistent",
                       .doc = "one CTA per SM looping over the work tiles (the sm_90a warp-specialised forward)",
                       .device = "kPersistent", .hashed_when_set = true});
  f(SpecField<K, Arch>{.member = &K::arch, .name = "arch", .role = FieldRole::target, .uri = "_", .hash_key = "arch",
                       .cli = "--arch", .doc = "target GPU architecture", .mlir = MlirPlace::after_for});
}

// The ProblemOptions fields only, in table order.
template <typename F>
constexpr void for_each_problem_field(F&& f) {
  for_each_spec_field([&](const auto& field) {
    if constexpr (std::is_same_v<typename std::decay_t<decltype(field)>::owner_type, ProblemOptions>) f(field);
  });
}

constexpr int kSpecFieldCount = [] {
  int n = 0;
  for_each_spec_field([&](const auto&) { ++n; });
  return n;
}();

constexpr int kProblemFieldCount = [] {
  int n = 0;
  for_each_problem_field([&](const auto&) { ++n; });
  return n;
}();

// The problem options are exactly the members of ProblemOptions.
static_assert([] {
  bool ok = true;
  for_each_spec_field([&](const auto& field) {
    using Owner = typename std::decay_t<decltype(field)>::owner_type;
    ok = ok && (field.role == FieldRole::problem) == std::is_same_v<Owner, ProblemOptions>;
  });
  return ok;
}());

// A value as the URI, the JSON and the CLI spell it: decimal, true/false, the enum's name.
inline std::string field_text(int v) { return std::to_string(v); }
inline std::string field_text(bool v) { return v ? "true" : "false"; }
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
std::string field_text(E v) {
  return EnumSpelling<E>::print(v);
}

// "a, b or c": the values an option or attribute accepts, for error messages.
std::string one_of(const std::vector<std::string>& words);
template <typename E>
std::string enum_values(E = {}) {
  std::vector<std::string> words;
  for (E v : EnumSpelling<E>::values()) words.push_back(EnumSpelling<E>::print(v));
  return one_of(words);
}

// What a field of type T accepts, for error messages.
template <typename T>
std::string expected_value() {
  if constexpr (std::is_enum_v<T>)
    return enum_values<T>();
  else if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else
    return "an integer";
}

// A field's part of a URI or TuningKey name: "_d128", "_causal", "" for a flag not set.
template <typename Field>
std::string uri_part(const Field& field, typename Field::value_type value) {
  if constexpr (std::is_same_v<typename Field::value_type, bool>)
    return value ? field.uri : "";
  else
    return field.uri + field_text(value);
}

// Every field's value as an integer in table order (enums by value): what the in-memory
// caches hash.
std::array<long long, kSpecFieldCount> spec_field_values(const KernelSpec& spec);
std::array<long long, kProblemFieldCount> problem_field_values(const ProblemOptions& options);

// True when a and b differ at most in their tile fields (a tuning candidate of b).
bool same_but_tiles(const KernelSpec& a, const KernelSpec& b);

// "head_dim 128, bf16, causal": a problem's options for messages.
std::string describe(const ProblemOptions& options);

// One constant of the generated source: `constexpr <type> <name> = <value>;  // <doc>`.
struct DeviceConstant {
  std::string name;   // kHeadDim, kBlockM, ..., kIsBf16 (from dtype)
  std::string type;   // int or bool
  std::string value;  // as C++ spells it: 128, true
  std::string doc;
};
// The spec's fields as constants of the generated source, in table order (pass and arch
// have none: the entry point and the NVRTC target carry them).
std::vector<DeviceConstant> device_constants(const KernelSpec& spec);

}  // namespace flashgen
