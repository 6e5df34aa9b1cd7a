#include "fuzz_mutations.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace flashgen::test::fuzz {
namespace {

using Result = std::optional<Expected>;
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int32_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}
template <typename T, std::size_t N>
T pick(std::mt19937_64& rng, const T (&choices)[N]) {
  return choices[uniform(rng, 0, N - 1)];
}

int rank_of(const Slot& s) { return std::strcmp(s.name, "lse") == 0 ? 3 : 4; }
bool is(const Slot& s, const char* name) { return std::strcmp(s.name, name) == 0; }

// A random slot that satisfies `want`; nullptr when none does.
template <typename Want>
Slot* any(Target& t, std::mt19937_64& rng, Want&& want) {
  std::vector<Slot*> fits;
  for (Slot& s : t.slots)
    if (want(s)) fits.push_back(&s);
  return fits.empty() ? nullptr : fits[uniform(rng, 0, fits.size() - 1)];
}
Slot& any(Target& t, std::mt19937_64& rng) { return *any(t, rng, [](const Slot&) { return true; }); }

Slot* find(Target& t, const char* name) {
  for (Slot& s : t.slots)
    if (is(s, name)) return &s;
  return nullptr;
}

Expected named(const Slot& s, const std::string& what, std::string contains = "") {
  return Expected{{fmt::format("{}: {}", s.name, what)}, std::move(contains)};
}

// "<name>: <what>" for each slot in `names` that this pass has.
Expected named_any(Target& t, std::initializer_list<const char*> names, const std::string& what) {
  Expected e;
  for (const char* n : names)
    if (find(t, n) != nullptr) e.prefixes.push_back(fmt::format("{}: {}", n, what));
  return e;
}

// The outputs from `s` on (in validation order): when s moves onto memory that an output
// after it also covers, that later output's check may be the one that fails.
Expected shares_memory_from(Target& t, const Slot& s) {
  Expected e;
  bool from = false;
  for (const Slot& o : t.slots) {
    from = from || &o == &s;
    if (from && o.output) e.prefixes.push_back(fmt::format("{}: shares memory with", o.name));
  }
  return e;
}

// A dimension of `s` with size > 1 among the first `dims`, or -1.
int dim_larger_than_one(const Slot& s, int dims, std::mt19937_64& rng) {
  std::vector<int> fits;
  for (int d = 0; d < dims; ++d)
    if (s.tensor->shape[d] > 1) fits.push_back(d);
  return fits.empty() ? -1 : fits[uniform(rng, 0, fits.size() - 1)];
}

Result bad_rank(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  std::int32_t rank = rank_of(s);
  while (rank == rank_of(s)) rank = pick(rng, {0, 1, 2, 3, 4, 5, 8, -1, kInt32Min, kInt32Max});
  s.tensor->rank = rank;
  return named(s, fmt::format("rank is {}, expected {}", rank, rank_of(s)));
}

Result nonpositive_dim(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const int d = static_cast<int>(uniform(rng, 0, rank_of(s) - 1));
  s.tensor->shape[d] = pick(rng, {std::int64_t{0}, std::int64_t{-1}, std::int64_t{-7}, -(std::int64_t{1} << 40), kInt64Min});
  return named(s, fmt::format("shape[{}]", d), "expected > 0");
}

// A size that disagrees with the others: q and k define the geometry, so changing one of
// them is reported on a tensor checked against it.
Result shape_mismatch(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const int d = static_cast<int>(uniform(rng, 0, rank_of(s) - 1));
  std::int64_t& n = s.tensor->shape[d];
  const std::int64_t delta = pick(rng, {-2, -1, 1, 2, 5});
  n = n + delta > 0 ? n + delta : n + 1;
  if (is(s, "q")) return named_any(t, {"k", "o", "lse", "dout", "dq"}, "shape[");
  if (is(s, "k")) return named_any(t, {"k", "v", "dk", "dv"}, "shape[");
  return named(s, fmt::format("shape[{}]", d));
}

Result null_data(Target& t, std::mt19937_64& rng) {
  Slot* s = any(t, rng, [](const Slot& s) { return !(is(s, "lse") && s.output); });  // forward's lse may be null
  s->tensor->data = nullptr;
  return named(*s, "data is null");
}

Result dtype_out_of_enum(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const std::int32_t dtype = pick(rng, {3, 12345, -1, kInt32Min, kInt32Max, 0x5a5a5a5a});
  std::memcpy(&s.tensor->dtype, &dtype, sizeof dtype);
  return named(s, fmt::format("dtype is {}, expected fp32 (0), fp16 (1) or bf16 (2)", dtype));
}

Result mixed_dtypes(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const flashgen_dtype now = s.tensor->dtype;
  while (s.tensor->dtype == now) s.tensor->dtype = pick(rng, {FLASHGEN_F32, FLASHGEN_F16, FLASHGEN_BF16});
  if (is(s, "q")) return named_any(t, {"k"}, "dtype is");  // every other tensor now disagrees: the first is named
  return named(s, "dtype is", is(s, "lse") ? "expected fp32" : "like q");
}

Result device_below_cpu(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  s.tensor->device = pick(rng, {-2, -3, -1000, kInt32Min});
  return named(s, fmt::format("device is {}, expected -1 (CPU)", s.tensor->device));
}

Result devices_differ(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  s.tensor->device = pick(rng, {0, 1, 7, kInt32Max});
  if (is(s, "q")) return named_any(t, {"k"}, "device is cpu, expected cuda:");
  return named(s, fmt::format("device is cuda:{}, expected cpu like q", s.tensor->device));
}

Result negative_stride(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const int d = static_cast<int>(uniform(rng, 0, rank_of(s) - 1));
  std::int64_t& stride = s.tensor->stride[d];
  stride = pick(rng, {-std::abs(stride) - 1, std::int64_t{-1}, kInt64Min});
  return named(s, fmt::format("stride[{}]", d), "expected >= 0");
}

Result last_dim_strided(Target& t, std::mt19937_64& rng) {
  Slot* s = any(t, rng, [](const Slot& s) { return rank_of(s) == 4; });
  s->tensor->stride[3] = pick(rng, {std::int64_t{0}, std::int64_t{2}, std::int64_t{3}, std::int64_t{1} << 33});
  return named(*s, "stride[3] (head_dim)", "expected 1");
}

// A stride that makes the view's byte span pass 2^63.
Result span_overflows(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const int d = dim_larger_than_one(s, 3, rng);
  if (d < 0) return std::nullopt;
  s.tensor->stride[d] = pick(rng, {kInt64Max, kInt64Max / 2 + 1, std::int64_t{1} << 62});
  return named(s, "shape (", "spans more than 2^63 bytes");
}

// flashgen_tensor_contiguous of a shape whose strides pass int64 (issue 17: {4, 2^31, 2^31, 4}).
Result contiguous_overflows(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const std::int64_t big = std::int64_t{1} << pick(rng, {31, 32, 40});
  const std::int64_t shape[4] = {4, big, big, 4};
  flashgen_tensor& x = *s.tensor;
  flashgen_tensor_contiguous(&x, x.data, x.dtype, x.device, rank_of(s), rank_of(s) == 4 ? shape : shape + 1);
  return named(s, "shape (", "spans more than 2^63 bytes");
}

// q with 2^32 x 2^32 rows of zero stride: a tiny span, more elements than int64 counts.
Result elements_overflow(Target& t, std::mt19937_64& rng) {
  const std::int64_t big = std::int64_t{1} << pick(rng, {32, 33});
  for (Slot& s : t.slots) {
    if (rank_of(s) != 4) continue;
    s.tensor->shape[0] = big;
    if (is(s, "q") || is(s, "o") || is(s, "dout") || is(s, "dq")) {
      s.tensor->shape[1] = big;
      s.tensor->stride[0] = s.tensor->stride[1] = 0;
    }
  }
  return Expected{{fmt::format("q: shape ({}, {}, ", big, big)}, "more than 2^63 elements"};
}

Result heads_not_divisible(Target& t, std::mt19937_64& rng) {
  Slot& k = *find(t, "k");
  k.tensor->shape[2] = find(t, "q")->tensor->shape[2] + uniform(rng, 1, 3);
  return named(k, fmt::format("shape[2] (heads_kv) is {}, expected a divisor", k.tensor->shape[2]));
}

Result lse_not_contiguous(Target& t, std::mt19937_64& rng) {
  Slot& lse = *find(t, "lse");
  const int d = dim_larger_than_one(lse, 3, rng);
  if (d < 0) return std::nullopt;
  lse.tensor->stride[d] += pick(rng, {1, 2, 100});
  return named(lse, "strides are (", "expected contiguous");
}

// An output moved onto the memory of another argument (input or output).
Result output_overlaps(Target& t, std::mt19937_64& rng) {
  Slot* out = any(t, rng, [](const Slot& s) { return s.output; });
  Slot* other = any(t, rng, [&](const Slot& s) { return &s != out && s.tensor->data != out->tensor->data; });
  if (other == nullptr) return std::nullopt;
  out->tensor->data = other->tensor->data;
  Expected e = shares_memory_from(t, *out);
  if (other->output) e.prefixes.push_back(fmt::format("{}: shares memory with", other->name));
  return e;
}

// An output whose strides put two elements at one address: a zero stride, or two
// dimensions of size > 1 with the same stride.
Result output_writes_twice(Target& t, std::mt19937_64& rng) {
  Slot* out = any(t, rng, [](const Slot& s) { return s.output; });
  const int d = dim_larger_than_one(*out, 3, rng);
  if (d < 0) return std::nullopt;
  const int e = dim_larger_than_one(*out, rank_of(*out), rng);
  flashgen_tensor& x = *out->tensor;
  x.stride[d] = e >= 0 && e != d && uniform(rng, 0, 1) == 1 ? x.stride[e] : 0;
  if (is(*out, "lse")) return named(*out, "strides are (", "expected contiguous");
  return named(*out, "strides (", "put several elements at one address");
}

Result bad_softmax_scale(Target& t, std::mt19937_64& rng) {
  t.options->softmax_scale = pick(rng, {kInf, -kInf, -1.0f, 0.0f, -0.0f, -1e-30f});
  return Expected{{"options.softmax_scale: is "}, "expected a finite value > 0"};
}

Result bad_softcap(Target& t, std::mt19937_64& rng) {
  t.options->softcap = pick(rng, {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, -1.0f, -1e-30f});
  return Expected{{"options.softcap: is "}, "expected a finite value >= 0"};
}

Result bad_window(Target& t, std::mt19937_64& rng) {
  const bool left = uniform(rng, 0, 1) == 1;
  (left ? t.options->window_left : t.options->window_right) = pick(rng, {-2, -1000, kInt32Min});
  return Expected{{left ? "options.window_left: is " : "options.window_right: is "}, "expected -1 (unbounded) or >= 0"};
}

Result bad_workspace(Target& t, std::mt19937_64& rng) {
  void*& ws = *t.workspace;
  std::size_t& bytes = *t.workspace_bytes;
  switch (uniform(rng, 0, 3)) {
    case 0:
      ws = nullptr, bytes = static_cast<std::size_t>(uniform(rng, 1, 1 << 20));
      return Expected{{"workspace: is null"}, "expected a buffer of that size"};
    case 1:
      ws = any(t, rng).tensor->data, bytes = 0;
      return Expected{{"workspace_bytes: is 0"}, "expected the buffer's size"};
    case 2:
      ws = any(t, rng).tensor->data, bytes = static_cast<std::size_t>(uniform(rng, 1, 64));
      return Expected{{"workspace: ["}, "shares memory with"};
    default:  // a size that runs past the end of the address space
      ws = any(t, rng).tensor->data, bytes = std::numeric_limits<std::size_t>::max() - uniform(rng, 0, 15);
      return Expected{{"workspace: ["}, "runs past the end of the address space"};
  }
}

// A CPU data pointer that is not a multiple of its element size.
Result misaligned(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const int elem = s.tensor->dtype == FLASHGEN_F32 || is(s, "lse") ? 4 : 2;
  s.tensor->data = static_cast<char*>(s.tensor->data) + uniform(rng, 1, elem - 1);
  Expected e = s.output ? shares_memory_from(t, s) : Expected{};  // odd bytes in a packed block
  e.prefixes.push_back(fmt::format("{}: data pointer", s.name));
  return e;
}

// A view that starts so high that its span passes the end of the address space (a view
// that ends below it is only a bad pointer, which no validation can see).
Result address_wraps(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  const flashgen_tensor& x = *s.tensor;
  const std::uint64_t elem = x.dtype == FLASHGEN_F32 ? 4 : 2;
  std::uint64_t elements = 1;
  for (int d = 0; d < rank_of(s); ++d) elements += static_cast<std::uint64_t>((x.shape[d] - 1) * x.stride[d]);
  const std::uint64_t below_top = elem * static_cast<std::uint64_t>(uniform(rng, 1, static_cast<std::int64_t>(elements)));
  s.tensor->data = reinterpret_cast<void*>(std::uintptr_t{0} - below_top);
  return named(s, "view at ", "past the end of the address space");
}

// One tensor replaced by random bytes (an FFI caller's uninitialised struct).
Result garbage_tensor(Target& t, std::mt19937_64& rng) {
  Slot& s = any(t, rng);
  auto* bytes = reinterpret_cast<unsigned char*>(s.tensor);
  for (std::size_t i = 0; i < sizeof(flashgen_tensor); ++i) bytes[i] = static_cast<unsigned char>(uniform(rng, 0, 255));
  return named(s, "");
}

}  // namespace

const std::vector<Mutation>& mutations() {
  static const std::vector<Mutation> table{
      {"rank", kBothPasses, bad_rank},
      {"dim_not_positive", kBothPasses, nonpositive_dim},
      {"shape_mismatch", kBothPasses, shape_mismatch},
      {"null_data", kBothPasses, null_data},
      {"dtype_out_of_enum", kBothPasses, dtype_out_of_enum},
      {"mixed_dtypes", kBothPasses, mixed_dtypes},
      {"device_below_cpu", kBothPasses, device_below_cpu},
      {"devices_differ", kBothPasses, devices_differ},
      {"negative_stride", kBothPasses, negative_stride},
      {"last_dim_strided", kBothPasses, last_dim_strided},
      {"span_overflows_int64", kBothPasses, span_overflows},
      {"tensor_contiguous_overflows", kBothPasses, contiguous_overflows},
      {"elements_overflow_int64", kBothPasses, elements_overflow},
      {"heads_not_divisible", kBothPasses, heads_not_divisible},
      {"lse_not_contiguous", kBothPasses, lse_not_contiguous},
      {"output_overlaps_argument", kBothPasses, output_overlaps},
      {"output_writes_element_twice", kBothPasses, output_writes_twice},
      {"bad_softmax_scale", kBothPasses, bad_softmax_scale},
      {"bad_softcap", kBothPasses, bad_softcap},
      {"bad_window", kBothPasses, bad_window},
      {"bad_workspace", kBackwardPass, bad_workspace},
      {"misaligned_data", kBothPasses, misaligned},
      {"address_wraps", kBothPasses, address_wraps},
      {"garbage_tensor", kBothPasses, garbage_tensor},
  };
  return table;
}

const std::vector<std::string>& argument_names() {
  static const std::vector<std::string> names{"q: ",  "k: ",  "v: ",  "o: ",  "lse: ", "dout: ", "dq: ",
                                              "dk: ", "dv: ", "options.", "workspace: ", "workspace_bytes: ", "args.struct_size: "};
  return names;
}

}  // namespace flashgen::test::fuzz
