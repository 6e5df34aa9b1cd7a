// Argument validation, in the order a caller would fix things: each tensor on its own,
// the tensors against each other, the options (all invalid_argument), and last the
// limits of the backend the device selects (unsupported).
#include "runtime/validate.h"

#include "runtime/launch_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashgen {
namespace {

template <typename... A>
[[noreturn]] void fail(Status status, fmt::format_string<A...> f, A&&... a) {
  throw Error(status, fmt::format(f, std::forward<A>(a)...));
}

using DimNames = std::array<const char*, 4>;
constexpr DimNames kQueryDims{"batch", "seqlen_q", "heads_q", "head_dim"};
constexpr DimNames kKeyDims{"batch", "seqlen_k", "heads_kv", "head_dim"};
constexpr DimNames kLseDims{"batch", "heads_q", "seqlen_q", "unused"};
constexpr DimNames kPageDims{"num_pages", "page_size", "heads_kv", "head_dim"};
constexpr DimNames kBlockTableDims{"batch", "max_pages_per_seq", "unused", "unused"};
constexpr DimNames kSequsedDims{"batch", "unused", "unused", "unused"};
// Packed variable-length sequences (PackedSequences).
constexpr DimNames kPackedQueryDims{"total_q", "heads_q", "head_dim", "unused"};
constexpr DimNames kPackedKeyDims{"total_k", "heads_kv", "head_dim", "unused"};
constexpr DimNames kPackedLseDims{"heads_q", "total_q", "unused", "unused"};
constexpr DimNames kCuSeqlensDims{"batch + 1", "unused", "unused", "unused"};
// KV append (KvAppendArgs).
constexpr DimNames kNewKeyDims{"batch", "seqlen_new", "heads_kv", "head_dim"};
constexpr DimNames kPackedNewKeyDims{"total", "heads_kv", "head_dim", "unused"};
constexpr DimNames kPackedNewQueryDims{"total", "heads_q", "head_dim", "unused"};
constexpr DimNames kCacheDims{"batch", "capacity", "heads_kv", "head_dim"};
constexpr DimNames kRotaryDims{"positions", "rotary_dim / 2", "unused", "unused"};

// What a tensor argument holds: rows of head_dim elements in the problem's dtype (q, k, v, o
// and their gradients), the fp32 lse, int32 indices (block_table, seqused_k, cu_seqlens), or a
// table in the problem's dtype read one element at a time (rotary cos and sin).
enum class Kind { rows, lse, index, table };

// A tensor argument, its name in messages and the names of its dimensions.
struct Arg {
  const char* name;
  const Tensor& t;
  const DimNames& dims;
  int rank = 4;
  Kind kind = Kind::rows;
  std::span<const std::int64_t> shape() const { return {t.shape.data(), static_cast<std::size_t>(rank)}; }
  std::span<const std::int64_t> stride() const { return {t.stride.data(), static_cast<std::size_t>(rank)}; }
};

std::string device_name(int device) { return device == kCpu ? "cpu" : fmt::format("cuda:{}", device); }

bool valid_dtype(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Bytes from the view's first element to past its last one; nullopt when that does not fit
// in int64 (the backends index with it).
std::optional<std::int64_t> span_bytes(const Arg& a) {
  std::int64_t last = 0;
  bool overflow = false;
  for (int i = 0; i < a.rank; ++i) {
    std::int64_t step = 0;
    overflow |= __builtin_mul_overflow(a.t.shape[i] - 1, a.t.stride[i], &step);
    overflow |= __builtin_add_overflow(last, step, &last);
  }
  std::int64_t bytes = 0;
  overflow |= __builtin_add_overflow(last, std::int64_t{1}, &last);
  overflow |= __builtin_mul_overflow(last, static_cast<std::int64_t>(size_of(a.t.dtype)), &bytes);
  if (overflow) return std::nullopt;
  return bytes;
}

void check_span(const Arg& a) {
  const std::optional<std::int64_t> bytes = span_bytes(a);
  if (!bytes)
    fail(Status::invalid_argument, "{}: shape ({}) with strides ({}) spans more than 2^63 bytes, expected a view that fits in memory",
         a.name, fmt::join(a.shape(), ", "), fmt::join(a.stride(), ", "));
  // The overlap checks and the backends compute data + span: it must not wrap around.
  std::uintptr_t end = 0;
  if (__builtin_add_overflow(address(a.t.data), static_cast<std::uintptr_t>(*bytes), &end))
    fail(Status::invalid_argument,
         "{}: view at {} spans {} bytes, past the end of the address space, expected a view that fits in memory", a.name,
         fmt::ptr(a.t.data), *bytes);
}

// Everything a tensor must satisfy on its own.
void check_view(const Arg& a) {
  const Tensor& t = a.t;
  if (t.rank != a.rank)
    fail(Status::invalid_argument, "{}: rank is {}, expected {} ({})", a.name, t.rank, a.rank,
         fmt::join(std::span(a.dims.data(), a.rank), ", "));
  // Sizes before the pointer: an empty tensor (often with a null pointer) is named by the
  // dimension that is empty.
  for (int i = 0; i < a.rank; ++i)
    if (t.shape[i] <= 0)
      fail(Status::invalid_argument, "{}: shape[{}] ({}) is {}, expected > 0 (empty tensors are not supported)", a.name,
           i, a.dims[i], t.shape[i]);
  if (t.data == nullptr) fail(Status::invalid_argument, "{}: data is null, expected a pointer to the tensor's elements", a.name);
  if (a.kind == Kind::index && t.dtype != DType::i32)
    fail(Status::invalid_argument, "{}: dtype is {}, expected int32 (3)", a.name, static_cast<int>(t.dtype));
  if (a.kind != Kind::index && !valid_dtype(t.dtype))
    fail(Status::invalid_argument, "{}: dtype is {}, expected fp32 (0), fp16 (1) or bf16 (2)", a.name,
         static_cast<int>(t.dtype));
  if (t.device < kCpu)
    fail(Status::invalid_argument, "{}: device is {}, expected -1 (CPU) or a CUDA device ordinal >= 0", a.name, t.device);
  for (int i = 0; i < a.rank; ++i)
    if (t.stride[i] < 0)
      fail(Status::invalid_argument, "{}: stride[{}] ({}) is {}, expected >= 0", a.name, i, a.dims[i], t.stride[i]);
  if (a.kind != Kind::lse && t.stride[a.rank - 1] != 1)
    fail(Status::invalid_argument, "{}: stride[{}] ({}) is {}, expected 1 (the last dimension must be contiguous)",
         a.name, a.rank - 1, a.dims[a.rank - 1], t.stride[a.rank - 1]);
  check_span(a);
}

void expect_shape(const Arg& a, const std::array<std::int64_t, 4>& want, const char* like) {
  for (int i = 0; i < a.rank; ++i)
    if (a.t.shape[i] != want[i])
      fail(Status::invalid_argument, "{}: shape[{}] ({}) is {}, expected {} like {}", a.name, i, a.dims[i], a.t.shape[i],
           want[i], like);
}

// --- outputs must not share memory with the inputs or with each other -------------------

// The bytes [lo, hi) a view touches (check_span has bounded them).
struct ByteRange {
  std::uintptr_t lo, hi;
};
ByteRange byte_range(const Arg& a) {
  const std::uintptr_t lo = address(a.t.data);
  return {lo, lo + static_cast<std::uintptr_t>(*span_bytes(a))};
}

// Insertion sort of the first n (<= 4) entries (std::sort on a partly used std::array trips
// GCC 12's -Warray-bounds).
template <typename T, typename Less>
void sort_first(std::array<T, 4>& a, int n, Less less) {
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && less(a[j], a[j - 1]); --j) std::swap(a[j], a[j - 1]);
}

// True when an output view would write some element twice: a zero stride on a dimension of
// size > 1, or strides that, sorted, do not each clear the span of the smaller ones.
bool writes_an_element_twice(const Arg& a) {
  std::array<std::pair<std::int64_t, std::int64_t>, 4> dims{};  // (stride, size) of the size > 1 dimensions
  int n = 0;
  for (int i = 0; i < a.rank; ++i)
    if (a.t.shape[i] > 1) dims[n++] = {a.t.stride[i], a.t.shape[i]};
  sort_first(dims, n, [](const auto& x, const auto& y) { return x < y; });
  std::int64_t span = 0;  // largest offset the smaller dimensions reach
  for (int i = 0; i < n; ++i) {
    if (dims[i].first <= span) return true;
    span += (dims[i].second - 1) * dims[i].first;
  }
  return false;
}

// Whether sum_i delta_i * stride_i == d has a solution with lo_i <= delta_i <= hi_i, over
// dimensions [0, n) sorted by decreasing stride. Exact while each level leaves at most a
// few candidates (always so for the layouts attention uses); otherwise answers true.
bool reachable(std::int64_t d, const std::array<std::int64_t, 4>& stride, const std::array<std::int64_t, 4>& lo,
               const std::array<std::int64_t, 4>& hi, int level, int n) {
  if (level == n) return d == 0;
  std::int64_t rest_min = 0, rest_max = 0;  // what the smaller dimensions can add
  for (int j = level + 1; j < n; ++j) rest_min += lo[j] * stride[j], rest_max += hi[j] * stride[j];
  const std::int64_t s = stride[level];
  // delta * s in [d - rest_max, d - rest_min]
  auto floor_div = [](std::int64_t x, std::int64_t y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); };
  const std::int64_t first = std::max(lo[level], -floor_div(-(d - rest_max), s));
  const std::int64_t last = std::min(hi[level], floor_div(d - rest_min, s));
  if (last - first > 4) return true;  // too many candidates to search: assume they meet
  for (std::int64_t delta = first; delta <= last; ++delta)
    if (reachable(d - delta * s, stride, lo, hi, level + 1, n)) return true;
  return false;
}

// True when two views may share an element: their byte ranges meet and, where both have
// the same strides and element size (interleaved views of one buffer, e.g. packed dq, dk,
// dv), some element of one lies at an element of the other.
bool may_overlap(const Arg& a, const Arg& b) {
  const ByteRange ra = byte_range(a), rb = byte_range(b);
  if (ra.hi <= rb.lo || rb.hi <= ra.lo) return false;
  const std::int64_t elem = static_cast<std::int64_t>(size_of(a.t.dtype));
  if (a.rank != b.rank || size_of(b.t.dtype) != size_of(a.t.dtype)) return true;
  for (int i = 0; i < a.rank; ++i)
    if (a.t.stride[i] != b.t.stride[i]) return true;
  const std::int64_t bytes = static_cast<std::int64_t>(rb.lo) - static_cast<std::int64_t>(ra.lo);
  if (bytes % elem != 0) return true;
  // a's element ia meets b's element ib iff sum (ia - ib) * stride = bytes / elem.
  std::array<std::int64_t, 4> stride{}, lo{}, hi{};
  std::array<int, 4> order{};
  int n = 0;
  for (int i = 0; i < a.rank; ++i)
    if (a.t.stride[i] != 0) order[n++] = i;
  sort_first(order, n, [&](int x, int y) { return a.t.stride[x] > a.t.stride[y]; });
  for (int j = 0; j < n; ++j) {
    stride[j] = a.t.stride[order[j]];
    lo[j] = -(b.t.shape[order[j]] - 1);
    hi[j] = a.t.shape[order[j]] - 1;
  }
  return reachable(bytes / elem, stride, lo, hi, 0, n);
}

// Every output on its own, against every input, and against the outputs before it.
void check_outputs_apart(const std::vector<Arg>& inputs, const std::vector<Arg>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Arg& out = outputs[i];
    if (writes_an_element_twice(out))
      fail(Status::invalid_argument,
           "{}: strides ({}) for shape ({}) put several elements at one address (a zero stride or interleaved "
           "strides), expected every output element at an address of its own",
           out.name, fmt::join(out.stride(), ", "), fmt::join(out.shape(), ", "));
    auto apart = [&](const Arg& other) {
      if (may_overlap(out, other))
        fail(Status::invalid_argument,
             "{}: shares memory with {} ({} at {}, {} at {}), expected outputs that overlap no input and no other "
             "output",
             out.name, other.name, out.name, fmt::ptr(out.t.data), other.name, fmt::ptr(other.t.data));
    };
    for (const Arg& in : inputs) apart(in);
    for (std::size_t j = 0; j < i; ++j) apart(outputs[j]);
  }
}

// lse is fp32 (batch, heads_q, seqlen_q), or (heads_q, total_q) for packed sequences, densely
// packed; strides of size-1 dimensions do not matter.
void check_lse(const Arg& lse, const Problem& p) {
  check_view(lse);
  if (p.varlen)
    expect_shape(lse, {p.heads_q, p.total_q, 0, 0}, "q");
  else
    expect_shape(lse, {p.batch, p.heads_q, p.seqlen_q, 0}, "q");
  if (lse.t.dtype != DType::f32)
    fail(Status::invalid_argument, "lse: dtype is {}, expected fp32 (lse is always fp32)", to_string(lse.t.dtype));
  const std::array<std::int64_t, 3> dense =
      p.varlen ? std::array<std::int64_t, 3>{p.total_q, 1, 0} : std::array{p.heads_q * p.seqlen_q, p.seqlen_q, std::int64_t{1}};
  for (int i = 0; i < lse.rank; ++i)
    if (lse.t.shape[i] > 1 && lse.t.stride[i] != dense[i])
      fail(Status::invalid_argument, "lse: strides are ({}), expected contiguous ({}) for shape ({})",
           fmt::join(lse.stride(), ", "), fmt::join(std::span(dense.data(), lse.rank), ", "), fmt::join(lse.shape(), ", "));
}

// Each KV head serves a group of query heads; `dim` is k's heads_kv dimension.
void check_heads(const Problem& p, int dim) {
  if (p.heads_q % p.heads_kv != 0)
    fail(Status::invalid_argument,
         "k: shape[{}] (heads_kv) is {}, expected a divisor of q's heads_q = {} (each kv head serves a group of query heads)",
         dim, p.heads_kv, p.heads_q);
}

// Zero strides let a view of any element count fit in memory; the backends count elements
// and tasks in int64.
void check_element_count(const Arg& a) {
  std::int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < a.rank; ++i) overflow |= __builtin_mul_overflow(n, a.t.shape[i], &n);
  if (overflow)
    fail(Status::invalid_argument, "{}: shape ({}) has more than 2^63 elements, expected a size that int64 counts",
         a.name, fmt::join(a.shape(), ", "));
}

// A paged cache's geometry: `pages` (num_pages, page_size, ...) named by block_table (batch,
// max_pages_per_seq), whose batch must be p.batch (`batch_of` holds it); seqlen_k is the table's
// width times page_size.
void paged_geometry(Problem& p, const Arg& pages, const Tensor& block_table, const char* batch_of) {
  p.paged = true;
  p.num_pages = pages.t.shape[0];
  p.page_size = pages.t.shape[1];
  p.max_pages_per_seq = block_table.shape[1];
  if (block_table.shape[0] != p.batch)
    fail(Status::invalid_argument, "block_table: shape[0] (batch) is {}, expected {} like {}", block_table.shape[0],
         p.batch, batch_of);
  if (__builtin_mul_overflow(p.max_pages_per_seq, p.page_size, &p.seqlen_k))
    fail(Status::invalid_argument,
         "block_table: shape[1] (max_pages_per_seq) {} times {}'s page_size {} overflows int64, expected a sequence "
         "length that int64 counts",
         p.max_pages_per_seq, pages.name, p.page_size);
}

// A dense cache's or a paged cache's keys for p's batch (heads_q, head_dim known): k is
// (batch, seqlen_k, heads_kv, head_dim), or pages (num_pages, page_size, heads_kv, head_dim)
// that block_table names. `batch_of` names where the batch comes from.
void key_geometry(Problem& p, const Arg& k, const Tensor* block_table, const char* batch_of) {
  p.heads_kv = k.t.shape[2];
  if (block_table != nullptr) {
    paged_geometry(p, k, *block_table, batch_of);
    expect_shape(k, {p.num_pages, p.page_size, p.heads_kv, p.head_dim}, "q (head_dim)");
  } else {
    p.seqlen_k = k.t.shape[1];
    expect_shape(k, {p.batch, p.seqlen_k, p.heads_kv, p.head_dim}, batch_of);
  }
  check_element_count(k);
  check_heads(p, 2);
}

// The geometry q and k define; k must agree with q on batch and head_dim (a paged k: on
// head_dim, its pages are (num_pages, page_size, heads_kv, head_dim)).
Problem geometry(const Arg& q, const Arg& k, const Tensor* block_table = nullptr) {
  Problem p;
  p.batch = q.t.shape[0];
  p.seqlen_q = q.t.shape[1];
  p.heads_q = q.t.shape[2];
  p.head_dim = q.t.shape[3];
  p.dtype = q.t.dtype;
  p.device = q.t.device;
  check_element_count(q);
  key_geometry(p, k, block_table, "q");
  return p;
}

// Packed queries: q (total_q, heads_q, head_dim), cu_seqlens_q (batch + 1,), max_seqlen_q.
Problem packed_query_geometry(const Arg& q, const PackedSequences& s, const Arg& cu_q) {
  Problem p;
  p.varlen = true;
  p.total_q = q.t.shape[0];
  p.heads_q = q.t.shape[1];
  p.head_dim = q.t.shape[2];
  p.dtype = q.t.dtype;
  p.device = q.t.device;
  check_element_count(q);
  if (cu_q.t.shape[0] < 2)
    fail(Status::invalid_argument, "varlen.cu_seqlens_q: shape[0] (batch + 1) is {}, expected >= 2 (one sequence or more)",
         cu_q.t.shape[0]);
  p.batch = cu_q.t.shape[0] - 1;
  if (s.max_seqlen_q < 1)
    fail(Status::invalid_argument, "varlen.max_seqlen_q: is {}, expected >= 1 (a bound on every sequence's length)",
         s.max_seqlen_q);
  p.seqlen_q = s.max_seqlen_q;
  return p;
}

// The geometry of packed sequences: packed queries, k (total_k, heads_kv, head_dim),
// cu_seqlens_k like cu_seqlens_q and max_seqlen_k.
Problem packed_geometry(const Arg& q, const Arg& k, const PackedSequences& s, const Arg& cu_q, const Arg& cu_k) {
  Problem p = packed_query_geometry(q, s, cu_q);
  p.total_k = k.t.shape[0];
  p.heads_kv = k.t.shape[1];
  expect_shape(k, {p.total_k, p.heads_kv, p.head_dim, 0}, "q (head_dim)");
  check_element_count(k);
  expect_shape(cu_k, {cu_q.t.shape[0], 0, 0, 0}, "varlen.cu_seqlens_q");
  if (s.max_seqlen_k < 1)
    fail(Status::invalid_argument, "varlen.max_seqlen_k: is {}, expected >= 1 (a bound on every sequence's length)",
         s.max_seqlen_k);
  p.seqlen_k = s.max_seqlen_k;
  check_heads(p, 1);
  return p;
}

// On the CPU the offsets are read here: non-decreasing from >= 0 to at most the packed rows,
// each length at most its max_seqlen.
void check_cu_seqlens_on_cpu(const Arg& cu, std::int64_t total, std::int64_t max_seqlen, const char* rows,
                             const char* bound) {
  const auto* c = static_cast<const std::int32_t*>(cu.t.data);
  const std::int64_t n = cu.t.shape[0], step = cu.t.stride[0];
  if (c[0] < 0) fail(Status::invalid_argument, "{}: [0] is {}, expected >= 0", cu.name, c[0]);
  for (std::int64_t b = 0; b + 1 < n; ++b) {
    const std::int64_t lo = c[b * step], hi = c[(b + 1) * step];
    if (hi < lo)
      fail(Status::invalid_argument, "{}: [{}] = {} is below [{}] = {}, expected non-decreasing offsets", cu.name, b + 1,
           hi, b, lo);
    if (hi > total)
      fail(Status::invalid_argument, "{}: [{}] is {}, expected at most {} = {}", cu.name, b + 1, hi, rows, total);
    if (hi - lo > max_seqlen)
      fail(Status::invalid_argument, "{}: sequence {} has {} rows, expected at most {} = {}", cu.name, b, hi - lo, bound,
           max_seqlen);
  }
}

// dtype and device must match q's (lse: device only; its dtype is fp32).
void expect_like_q(const std::vector<Arg>& args, const Problem& p) {
  for (const Arg& a : args) {
    if ((a.kind == Kind::rows || a.kind == Kind::table) && a.t.dtype != p.dtype)
      fail(Status::invalid_argument, "{}: dtype is {}, expected {} like q", a.name, to_string(a.t.dtype), to_string(p.dtype));
    if (a.t.device != p.device)
      fail(Status::invalid_argument, "{}: device is {}, expected {} like q (all tensors on one device)", a.name,
           device_name(a.t.device), device_name(p.device));
  }
}

AttentionOptions resolve_options(AttentionOptions o, std::int64_t head_dim) {
  if (std::isnan(o.softmax_scale))
    o.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  else if (!std::isfinite(o.softmax_scale) || o.softmax_scale <= 0.0f)
    fail(Status::invalid_argument,
         "options.softmax_scale: is {}, expected a finite value > 0 (or NaN for the default 1/sqrt(head_dim))",
         o.softmax_scale);
  if (o.window_left < -1)
    fail(Status::invalid_argument, "options.window_left: is {}, expected -1 (unbounded) or >= 0", o.window_left);
  if (o.window_right < -1)
    fail(Status::invalid_argument, "options.window_right: is {}, expected -1 (unbounded) or >= 0", o.window_right);
  if (!std::isfinite(o.softcap) || o.softcap < 0.0f)
    fail(Status::invalid_argument, "options.softcap: is {}, expected a finite value >= 0 (0 disables soft-capping)",
         o.softcap);
  // Causal is a window that ends at the (bottom-right aligned) diagonal.
  if (o.causal) o.window_right = 0;
  return o;
}

// A dimension of q as messages name it, in the problem's layout ("q: shape[3] (head_dim)" dense,
// "q: shape[2] (head_dim)" packed); a packed batch is counted by varlen.cu_seqlens_q.
std::string q_dimension(const Problem& p, std::string_view name) {
  const DimNames& dims = p.varlen ? kPackedQueryDims : kQueryDims;
  for (int i = 0; i < 4; ++i)
    if (name == dims[i]) return fmt::format("q: shape[{}] ({})", i, name);
  return fmt::format("varlen.cu_seqlens_q: shape[0] - 1 ({})", name);
}

// 16-byte aligned rows (head_dim % 8 == 0: row strides a multiple of 8) for the kernels' vector
// loads; other tensors aligned to their element.
void check_gpu_alignment(const std::vector<Arg>& args, const Problem& p) {
  const std::string dev = device_name(p.device);
  for (const Arg& a : args) {
    const bool rows = a.kind == Kind::rows;
    const std::size_t align = rows ? kGpuAlignmentBytes : size_of(a.t.dtype);
    if (address(a.t.data) % align != 0)
      fail(Status::unsupported, "{}: data pointer {} is not {}-byte aligned, expected {}-byte alignment on {}{}", a.name,
           fmt::ptr(a.t.data), align, align, dev, rows ? " (the kernels use 16-byte vector loads)" : "");
    if (!rows || p.head_dim % 8 != 0) continue;
    for (int i = 0; i + 1 < a.rank; ++i)
      if (a.t.stride[i] % 8 != 0)
        fail(Status::unsupported,
             "{}: stride[{}] ({}) is {} elements, expected a multiple of 8 on {} when head_dim % 8 == 0 "
             "(rows must start on 16-byte boundaries for the kernels' vector loads)",
             a.name, i, a.dims[i], a.t.stride[i], dev);
  }
}

// The generated kernels: fp16/bf16, head_dim 1..256 (tiles of at least 32 columns), 16-byte vector loads of q/k/v/o rows.
void check_gpu_limits(const std::vector<Arg>& args, const Problem& p) {
  const std::string dev = device_name(p.device);
  if (p.dtype == DType::f32)
    fail(Status::unsupported, "q: dtype is fp32 on {}, expected fp16 or bf16 for the GPU kernels (fp32 runs on the CPU backend)",
         dev);
  if (p.head_dim < kGpuMinHeadDim || p.head_dim > kGpuMaxHeadDim)
    fail(Status::unsupported, "{} is {} on {}, expected {}..{} for the GPU kernels (the CPU backend takes 1..{})",
         q_dimension(p, "head_dim"), p.head_dim, dev, kGpuMinHeadDim, kGpuMaxHeadDim, kCpuMaxHeadDim);
  // The kernels' grid: (tiles, heads, batch), y and z at most 65535; lengths are int32 on the device.
  constexpr std::int64_t kGridYZ = kMaxGridYZ, kInt32 = std::numeric_limits<std::int32_t>::max();
  if (p.heads_q > kGridYZ)
    fail(Status::unsupported, "{} is {} on {}, expected at most {} for the GPU kernels' grid", q_dimension(p, "heads_q"),
         p.heads_q, dev, kGridYZ);
  if (p.batch > kGridYZ)
    fail(Status::unsupported, "{} is {} on {}, expected at most {} for the GPU kernels' grid", q_dimension(p, "batch"),
         p.batch, dev, kGridYZ);
  const char* keys = p.paged                     ? "block_table: shape[1] (max_pages_per_seq) x k: shape[1] (page_size)"
                     : p.varlen && !p.kv_cache() ? "varlen.max_seqlen_k"
                                                 : "k: shape[1] (seqlen_k)";
  const char* queries = p.varlen ? "varlen.max_seqlen_q" : "q: shape[1] (seqlen_q)";
  for (const auto& [what, n] : {std::pair{queries, p.seqlen_q}, {keys, p.seqlen_k}, {"k: shape[0] (num_pages)", p.num_pages},
                                {"q: shape[0] (total_q)", p.total_q}, {"k: shape[0] (total_k)", p.total_k}})
    if (n > kInt32) fail(Status::unsupported, "{} is {} on {}, expected at most 2^31 - 1 for the GPU kernels", what, n, dev);
  check_gpu_alignment(args, p);
}

void check_cpu_alignment(const std::vector<Arg>& args) {
  for (const Arg& a : args)
    if (address(a.t.data) % size_of(a.t.dtype) != 0)
      fail(Status::invalid_argument, "{}: data pointer {} is not aligned to its element size, expected a multiple of {} bytes",
           a.name, fmt::ptr(a.t.data), size_of(a.t.dtype));
}

void check_cpu_limits(const std::vector<Arg>& args, const Problem& p) {
  if (p.head_dim > kCpuMaxHeadDim)
    fail(Status::unsupported, "{} is {}, expected 1..{} for the CPU backend", q_dimension(p, "head_dim"), p.head_dim,
         kCpuMaxHeadDim);
  check_cpu_alignment(args);
}

void check_backend_limits(const std::vector<Arg>& args, const Problem& p) {
  if (p.device == kCpu)
    check_cpu_limits(args, p);
  else
    check_gpu_limits(args, p);
}

void check_workspace(const BackwardArgs& args, const Problem& p, const std::vector<Arg>& tensors) {
  if (args.workspace == nullptr && args.workspace_bytes != 0)
    fail(Status::invalid_argument,
         "workspace: is null but workspace_bytes is {}, expected a buffer of that size (or workspace_bytes = 0 to let "
         "flashgen allocate)",
         args.workspace_bytes);
  if (args.workspace != nullptr && args.workspace_bytes == 0)
    fail(Status::invalid_argument, "workspace_bytes: is 0 but workspace is {}, expected the buffer's size in bytes",
         fmt::ptr(args.workspace));
  if (args.workspace != nullptr) {
    const std::uintptr_t lo = address(args.workspace);
    std::uintptr_t hi = 0;
    if (__builtin_add_overflow(lo, args.workspace_bytes, &hi))
      fail(Status::invalid_argument,
           "workspace: [{}, +{} bytes) runs past the end of the address space, expected a buffer that fits in memory",
           fmt::ptr(args.workspace), args.workspace_bytes);
    for (const Arg& a : tensors) {
      const ByteRange r = byte_range(a);
      if (r.lo < hi && lo < r.hi)
        fail(Status::invalid_argument,
             "workspace: [{}, +{} bytes) shares memory with {} (at {}), expected a buffer of its own", fmt::ptr(args.workspace),
             args.workspace_bytes, a.name, fmt::ptr(a.t.data));
    }
  }
  if (args.workspace != nullptr && p.device != kCpu && address(args.workspace) % kGpuAlignmentBytes != 0)
    fail(Status::unsupported, "workspace: pointer {} is not {}-byte aligned, expected {}-byte alignment on {}",
         fmt::ptr(args.workspace), kGpuAlignmentBytes, kGpuAlignmentBytes, device_name(p.device));
}

// Dense tensors are rank 4 (batch, seqlen, heads, head_dim), packed sequences rank 3
// (total, heads, head_dim) with lse (heads_q, total_q).
struct RowLayout {
  const DimNames& query;
  const DimNames& key;
  const DimNames& lse;
  int rank, lse_rank;
};
RowLayout row_layout(const PackedSequences& s) {
  if (s.packed()) return {kPackedQueryDims, kPackedKeyDims, kPackedLseDims, 3, 2};
  return {kQueryDims, kKeyDims, kLseDims, 4, 3};
}
std::array<std::int64_t, 4> query_shape(const Problem& p) {
  if (p.varlen) return {p.total_q, p.heads_q, p.head_dim, 0};
  return {p.batch, p.seqlen_q, p.heads_q, p.head_dim};
}
std::array<std::int64_t, 4> key_shape(const Problem& p) {
  if (p.varlen) return {p.total_k, p.heads_kv, p.head_dim, 0};
  return {p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
}

// cu_seqlens_q and cu_seqlens_k come together, except over a KV cache (block_table or
// seqused_k), where only the queries are packed and the keys are the cache's.
void check_packed_sequences(const PackedSequences& s, bool kv_cache) {
  if (s.packed() && kv_cache && s.cu_seqlens_k.data != nullptr)
    fail(Status::invalid_argument,
         "varlen.cu_seqlens_k: is set with a KV cache (block_table or seqused_k), expected null: the keys of sequence "
         "b are those of the cache's row b (or block_table row b), seqused_k[b] of them");
  if (s.packed() && kv_cache && s.max_seqlen_k != 0)
    fail(Status::invalid_argument,
         "varlen.max_seqlen_k: is {} with a KV cache (block_table or seqused_k), expected 0: the cache's length bounds "
         "the keys",
         s.max_seqlen_k);
  if (s.packed() && !kv_cache && s.cu_seqlens_k.data == nullptr)
    fail(Status::invalid_argument,
         "varlen.cu_seqlens_k: data is null while varlen.cu_seqlens_q is set, expected both offsets of packed sequences "
         "(or a KV cache: block_table or seqused_k)");
  if (!s.packed() && s.cu_seqlens_k.data == nullptr && (s.max_seqlen_q != 0 || s.max_seqlen_k != 0))
    fail(Status::invalid_argument,
         "varlen.max_seqlen_q/max_seqlen_k: are {}/{} without cu_seqlens, expected 0 (a dense batch) or both offsets "
         "of packed sequences",
         s.max_seqlen_q, s.max_seqlen_k);
  if (!s.packed() && s.cu_seqlens_k.data != nullptr)
    fail(Status::invalid_argument,
         "varlen.cu_seqlens_q: data is null while varlen.cu_seqlens_k is set, expected both offsets of packed sequences");
}

// Adds the index tensors that are given (block_table, seqused_k, cu_seqlens) to the tensors
// and inputs, each checked on its own.
void add_index_tensors(std::initializer_list<Arg> indices, std::vector<Arg>& tensors, std::vector<Arg>& inputs) {
  for (const Arg& a : indices)
    if (a.t.data != nullptr) {
      check_view(a);
      tensors.push_back(a);
      inputs.push_back(a);
    }
}

// A dense batch, packed sequences, or packed queries over a KV cache (kv_cache).
Problem problem_of(const Arg& q, const Arg& k, const PackedSequences& s, const std::array<Arg, 2>& cu,
                   bool kv_cache = false, const Tensor* block_table = nullptr) {
  if (!s.packed()) return geometry(q, k, block_table);
  if (!kv_cache) return packed_geometry(q, k, s, cu[0], cu[1]);
  Problem p = packed_query_geometry(q, s, cu[0]);
  key_geometry(p, k, block_table, "varlen.cu_seqlens_q (batch + 1)");
  return p;
}

// After the backend's limits: on the CPU the offsets are read (the GPU clamps them instead).
void check_packed_offsets(const Problem& p, const PackedSequences& s, const std::array<Arg, 2>& cu) {
  if (!p.varlen || p.device != kCpu) return;
  check_cu_seqlens_on_cpu(cu[0], p.total_q, s.max_seqlen_q, "q: shape[0] (total_q)", "varlen.max_seqlen_q");
  if (!p.kv_cache())
    check_cu_seqlens_on_cpu(cu[1], p.total_k, s.max_seqlen_k, "k: shape[0] (total_k)", "varlen.max_seqlen_k");
}

// ForwardArgs::num_splits: a count split-KV can run, and a split only where it runs.
void check_num_splits(const Problem& p) {
  if (p.num_splits < 0 || p.num_splits > kMaxNumSplits)
    fail(Status::invalid_argument, "num_splits: is {}, expected 0 (automatic), 1 (unsplit) or 2..{}", p.num_splits,
         kMaxNumSplits);
  if (p.num_splits > 1 && !decode_shaped(problem_key(p)))
    fail(Status::invalid_argument,
         "num_splits: is {}, expected 0 or 1 for this call: keys are split only in decode-shaped calls (seqlen_q <= {} "
         "or a KV cache), this one {}",
         p.num_splits, kDecodeMaxSeqlenQ,
         p.varlen ? "packs sequences without a cache (they run on the prefill kernels)"
                  : fmt::format("has seqlen_q {} and no cache", p.seqlen_q));
}

std::array<Arg, 2> offsets_args(const PackedSequences& s) {
  return {Arg{"varlen.cu_seqlens_q", s.cu_seqlens_q, kCuSeqlensDims, 1, Kind::index},
          Arg{"varlen.cu_seqlens_k", s.cu_seqlens_k, kCuSeqlensDims, 1, Kind::index}};
}

}  // namespace

Problem validate_forward(const ForwardArgs& args) {
  const bool paged = args.block_table.data != nullptr;
  const bool kv_cache = paged || args.seqused_k.data != nullptr;
  check_packed_sequences(args.varlen, kv_cache);
  const RowLayout rl = row_layout(args.varlen);
  // A cache's keys are rank 4 whether or not the queries are packed.
  const DimNames& kv_dims = paged ? kPageDims : kv_cache ? kKeyDims : rl.key;
  const int kv_rank = kv_cache ? 4 : rl.rank;
  const Arg q{"q", args.q, rl.query, rl.rank}, k{"k", args.k, kv_dims, kv_rank}, v{"v", args.v, kv_dims, kv_rank};
  const Arg o{"o", args.o, rl.query, rl.rank}, lse{"lse", args.lse, rl.lse, rl.lse_rank, Kind::lse};
  const Arg block_table{"block_table", args.block_table, kBlockTableDims, 2, Kind::index};
  const Arg seqused_k{"seqused_k", args.seqused_k, kSequsedDims, 1, Kind::index};
  const std::array<Arg, 2> cu = offsets_args(args.varlen);
  std::vector<Arg> tensors{q, k, v, o};
  std::vector<Arg> inputs{q, k, v};
  for (const Arg& a : tensors) check_view(a);
  add_index_tensors({block_table, seqused_k, cu[0], cu[1]}, tensors, inputs);

  Problem p = problem_of(q, k, args.varlen, cu, kv_cache, paged ? &args.block_table : nullptr);
  p.has_seqused_k = args.seqused_k.data != nullptr;
  if (p.has_seqused_k && args.seqused_k.shape[0] != p.batch)
    fail(Status::invalid_argument, "seqused_k: shape[0] (batch) is {}, expected {} like {}", args.seqused_k.shape[0],
         p.batch, p.varlen ? "varlen.cu_seqlens_q (batch + 1)" : "q");
  expect_shape(v, {k.t.shape[0], k.t.shape[1], k.t.shape[2], k.t.shape[3]}, "k");  // v is laid out like k
  expect_shape(o, query_shape(p), "q");
  p.has_lse = args.lse.data != nullptr;  // null: the caller does not want lse
  if (p.has_lse) {
    check_lse(lse, p);
    tensors.push_back(lse);
  }
  expect_like_q(tensors, p);
  std::vector<Arg> outputs{o};
  if (p.has_lse) outputs.push_back(lse);
  check_outputs_apart(inputs, outputs);
  p.options = resolve_options(args.options, p.head_dim);
  check_backend_limits(tensors, p);
  check_packed_offsets(p, args.varlen, cu);
  p.num_splits = args.num_splits;
  check_num_splits(p);
  return p;
}

Problem validate_backward(const BackwardArgs& args) {
  check_packed_sequences(args.varlen, false);
  const RowLayout rl = row_layout(args.varlen);
  const Arg q{"q", args.q, rl.query, rl.rank}, k{"k", args.k, rl.key, rl.rank}, v{"v", args.v, rl.key, rl.rank};
  const Arg o{"o", args.o, rl.query, rl.rank}, dout{"dout", args.dout, rl.query, rl.rank};
  const Arg dq{"dq", args.dq, rl.query, rl.rank}, dk{"dk", args.dk, rl.key, rl.rank}, dv{"dv", args.dv, rl.key, rl.rank};
  const Arg lse{"lse", args.lse, rl.lse, rl.lse_rank, Kind::lse};
  const std::array<Arg, 2> cu = offsets_args(args.varlen);
  std::vector<Arg> tensors{q, k, v, o, dout, dq, dk, dv};
  for (const Arg& a : tensors) check_view(a);
  std::vector<Arg> inputs{q, k, v, o, dout};
  add_index_tensors({cu[0], cu[1]}, tensors, inputs);

  Problem p = problem_of(q, k, args.varlen, cu);
  for (const Arg* a : {&v, &dk, &dv}) expect_shape(*a, key_shape(p), "k");
  for (const Arg* a : {&o, &dout, &dq}) expect_shape(*a, query_shape(p), "q");
  check_lse(lse, p);  // backward recomputes P from lse: required
  tensors.push_back(lse);
  inputs.push_back(lse);
  expect_like_q(tensors, p);
  check_outputs_apart(inputs, {dq, dk, dv});
  p.options = resolve_options(args.options, p.head_dim);
  check_workspace(args, p, tensors);
  check_backend_limits(tensors, p);
  check_packed_offsets(p, args.varlen, cu);
  return p;
}

namespace {

// On the CPU the positions are read here: every new row lands inside the cache, on a page
// the block table names inside it, and every rotated query finds its row of the tables.
void check_append_positions_on_cpu(const KvAppendArgs& args, const KvAppendProblem& a) {
  const Problem& p = a.cache;
  const auto* start = static_cast<const std::int32_t*>(args.cache_seqlens.data);
  const auto* table = static_cast<const std::int32_t*>(args.block_table.data);
  const auto* cu = static_cast<const std::int32_t*>(args.cu_seqlens.data);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t pos = start[b * args.cache_seqlens.stride[0]];
    const std::int64_t n = a.packed ? cu[(b + 1) * args.cu_seqlens.stride[0]] - cu[b * args.cu_seqlens.stride[0]]
                                    : a.seqlen_new;  // its new rows
    if (pos < 0 || pos + n > p.seqlen_k)
      fail(Status::invalid_argument,
           "cache_seqlens: [{}] is {}, expected 0..{} (the cache holds {} positions per sequence and {} = {} rows are "
           "appended)",
           b, pos, p.seqlen_k - n, p.seqlen_k,
           a.packed ? fmt::format("sequence {} of cu_seqlens", b) : std::string("k: shape[1] (seqlen_new)"), n);
    if (p.paged)
      for (std::int64_t slot = pos / p.page_size; n > 0 && slot <= (pos + n - 1) / p.page_size; ++slot) {
        const std::int64_t page = table[b * args.block_table.stride[0] + slot * args.block_table.stride[1]];
        if (page < 0 || page >= p.num_pages)
          fail(Status::invalid_argument, "block_table: [{}][{}] is {}, expected a page in 0..{} (k_cache: shape[0])", b,
               slot, page, p.num_pages - 1);
      }
    const std::int64_t queries = a.packed ? n : p.seqlen_q;
    if (a.rotate_q && queries > 0) {
      const std::int64_t last = pos + (args.q_at_consecutive_positions ? queries - 1 : 0);
      if (last >= a.rotary_rows)
        fail(Status::invalid_argument,
             "rotary.cos: shape[0] (positions) is {}, expected more than {} (the last position of sequence {}'s "
             "queries: cache_seqlens[{}] = {}{})",
             a.rotary_rows, last, b, b, pos,
             args.q_at_consecutive_positions ? fmt::format(" + {} queries - 1", queries) : "");
    }
  }
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.data == b.data && a.rank == b.rank && a.shape == b.shape && a.stride == b.stride && a.dtype == b.dtype &&
         a.device == b.device;
}

}  // namespace

KvAppendProblem validate_kv_append(const KvAppendArgs& args) {
  const bool paged = args.block_table.data != nullptr, packed = args.cu_seqlens.data != nullptr;
  const DimNames& cache_dims = paged ? kPageDims : kCacheDims;
  const DimNames& new_dims = packed ? kPackedNewKeyDims : kNewKeyDims;
  const DimNames& q_dims = packed ? kPackedNewQueryDims : kQueryDims;
  const int rank = packed ? 3 : 4, d = rank - 1;  // the rows' rank and head_dim's dimension
  const Arg k{"k", args.k, new_dims, rank}, v{"v", args.v, new_dims, rank};
  const Arg k_cache{"k_cache", args.k_cache, cache_dims}, v_cache{"v_cache", args.v_cache, cache_dims};
  const Arg block_table{"block_table", args.block_table, kBlockTableDims, 2, Kind::index};
  const Arg cache_seqlens{"cache_seqlens", args.cache_seqlens, kSequsedDims, 1, Kind::index};
  const Arg cos{"rotary.cos", args.rotary.cos, kRotaryDims, 2, Kind::table};
  const Arg sin{"rotary.sin", args.rotary.sin, kRotaryDims, 2, Kind::table};
  const Arg q{"q", args.q, q_dims, rank}, q_rotated{"q_rotated", args.q_rotated, q_dims, rank};
  const Arg cu{"cu_seqlens", args.cu_seqlens, kCuSeqlensDims, 1, Kind::index};
  if (args.cache_seqlens.data == nullptr)
    fail(Status::invalid_argument,
         "cache_seqlens: data is null, expected int32 (batch,): each sequence's length in the cache, where its new "
         "rows go");
  std::vector<Arg> tensors{k, v, k_cache, v_cache, cache_seqlens};
  for (const Arg& a : tensors) check_view(a);
  std::vector<Arg> inputs{k, v, cache_seqlens};
  std::vector<Arg> outputs{k_cache, v_cache};
  add_index_tensors({block_table, cu}, tensors, inputs);

  KvAppendProblem a;
  Problem& p = a.cache;
  a.packed = packed;
  if (packed) {
    if (cu.t.shape[0] < 2)
      fail(Status::invalid_argument, "cu_seqlens: shape[0] (batch + 1) is {}, expected >= 2 (one sequence or more)",
           cu.t.shape[0]);
    p.batch = cu.t.shape[0] - 1;
    a.seqlen_new = k.t.shape[0];
  } else {
    p.batch = k.t.shape[0];
    a.seqlen_new = k.t.shape[1];
  }
  p.heads_kv = k.t.shape[d - 1];
  p.head_dim = k.t.shape[d];
  p.dtype = k.t.dtype;
  p.device = k.t.device;
  expect_shape(v, {k.t.shape[0], k.t.shape[1], k.t.shape[2], k.t.shape[3]}, "k");
  const char* batch_of = packed ? "cu_seqlens" : "k";
  if (paged) {
    paged_geometry(p, k_cache, block_table.t, batch_of);
    expect_shape(k_cache, {p.num_pages, p.page_size, p.heads_kv, p.head_dim}, "k (heads_kv, head_dim)");
  } else {
    p.seqlen_k = k_cache.t.shape[1];
    expect_shape(k_cache, {p.batch, p.seqlen_k, p.heads_kv, p.head_dim},
                 packed ? "cu_seqlens (batch) and k (heads_kv, head_dim)" : "k (batch, heads_kv, head_dim)");
  }
  expect_shape(v_cache, {k_cache.t.shape[0], k_cache.t.shape[1], p.heads_kv, p.head_dim}, "k_cache");
  if (args.cache_seqlens.shape[0] != p.batch)
    fail(Status::invalid_argument, "cache_seqlens: shape[0] (batch) is {}, expected {} like {}",
         args.cache_seqlens.shape[0], p.batch, batch_of);
  if (!packed && a.seqlen_new > p.seqlen_k)
    fail(Status::invalid_argument, "k: shape[1] (seqlen_new) is {}, expected at most the cache's capacity {}",
         a.seqlen_new, p.seqlen_k);

  if (args.rotary.active()) {
    if (args.rotary.cos.data == nullptr || args.rotary.sin.data == nullptr)
      fail(Status::invalid_argument, "{}: data is null while {} is set, expected both tables of the rotary embedding",
           args.rotary.cos.data == nullptr ? "rotary.cos" : "rotary.sin",
           args.rotary.cos.data == nullptr ? "rotary.sin" : "rotary.cos");
    check_view(cos);
    check_view(sin);
    expect_shape(sin, {cos.t.shape[0], cos.t.shape[1], 0, 0}, "rotary.cos");
    if (sin.t.stride[0] != cos.t.stride[0] && cos.t.shape[0] > 1)
      fail(Status::invalid_argument, "rotary.sin: stride[0] (positions) is {}, expected {} like rotary.cos",
           sin.t.stride[0], cos.t.stride[0]);
    a.rotary_dim = 2 * cos.t.shape[1];
    a.rotary_rows = cos.t.shape[0];
    if (a.rotary_dim % 16 != 0 || a.rotary_dim > p.head_dim)
      fail(Status::invalid_argument,
           "rotary.cos: shape[1] (rotary_dim / 2) is {}, expected rotary_dim = {} to be a multiple of 16 and at most "
           "k: shape[{}] (head_dim) = {}",
           cos.t.shape[1], a.rotary_dim, d, p.head_dim);
    if (a.rotary_rows < p.seqlen_k)
      fail(Status::invalid_argument,
           "rotary.cos: shape[0] (positions) is {}, expected at least the cache's capacity {} (a row for every "
           "position a new key may take)",
           a.rotary_rows, p.seqlen_k);
    for (const Arg* t : {&cos, &sin}) {
      tensors.push_back(*t);
      inputs.push_back(*t);
    }
  }
  if (args.q.data != nullptr || args.q_rotated.data != nullptr) {
    if (!args.rotary.active())
      fail(Status::invalid_argument,
           "q: is set without rotary.cos and rotary.sin, expected both tables (append_kv only rotates q)");
    check_view(q);
    check_view(q_rotated);
    a.rotate_q = true;
    p.seqlen_q = packed ? q.t.shape[0] : q.t.shape[1];
    p.heads_q = q.t.shape[d - 1];
    if (packed && (q.t.shape[0] != a.seqlen_new || q.t.shape[2] != p.head_dim))
      fail(Status::invalid_argument,
           "q: shape is ({}), expected ({}, heads_q, {}) like k (total, head_dim): packed with the same offsets",
           fmt::join(q.shape(), ", "), a.seqlen_new, p.head_dim);
    if (!packed && (q.t.shape[0] != p.batch || q.t.shape[3] != p.head_dim))
      fail(Status::invalid_argument, "q: shape is ({}), expected ({}, seqlen_q, heads_q, {}) like k (batch, head_dim)",
           fmt::join(q.shape(), ", "), p.batch, p.head_dim);
    expect_shape(q_rotated, {q.t.shape[0], q.t.shape[1], q.t.shape[2], q.t.shape[3]}, "q");
    check_element_count(q);
    a.q_in_place = same_view(args.q, args.q_rotated);
    tensors.push_back(q);
    inputs.push_back(q);
    if (!a.q_in_place) {
      tensors.push_back(q_rotated);
      outputs.push_back(q_rotated);
    }
  }
  for (const Arg* t : {&k, &k_cache}) check_element_count(*t);
  for (const Arg& t : tensors)  // expect_like_q's messages, naming k
    if (((t.kind == Kind::rows || t.kind == Kind::table) && t.t.dtype != p.dtype) || t.t.device != p.device)
      fail(Status::invalid_argument, "{}: is {} on {}, expected {} on {} like k", t.name, to_string(t.t.dtype),
           device_name(t.t.device), to_string(p.dtype), device_name(p.device));
  check_outputs_apart(inputs, outputs);
  if (p.device != kCpu) {
    constexpr std::int64_t kInt32 = std::numeric_limits<std::int32_t>::max();
    for (const auto& [what, n] : {std::pair{packed ? "k: shape[0] (total)" : "k: shape[1] (seqlen_new)", a.seqlen_new},
                                  {"the cache's capacity", p.seqlen_k},
                                  {"k's rows (batch x seqlen_new)", a.new_rows()},
                                  {"q's rows (batch x seqlen_q)", a.query_rows()},
                                  {"k_cache: shape[0] (num_pages)", p.num_pages},
                                  {"rotary.cos: shape[0] (positions)", a.rotary_rows}})
      if (n > kInt32)
        fail(Status::unsupported, "{} is {} on {}, expected at most 2^31 - 1 for the GPU kernels", what, n,
             device_name(p.device));
  }
  if (p.device == kCpu) {
    check_cpu_alignment(tensors);
    if (packed) check_cu_seqlens_on_cpu(cu, a.seqlen_new, p.seqlen_k, "k: shape[0] (total)", "the cache's capacity");
    check_append_positions_on_cpu(args, a);
  } else {
    if (p.dtype == DType::f32)
      fail(Status::unsupported, "k: dtype is fp32 on {}, expected fp16 or bf16 for the GPU kernels (fp32 runs on the "
           "CPU backend)", device_name(p.device));
    if (p.head_dim > kGpuMaxHeadDim)
      fail(Status::unsupported, "k: shape[{}] (head_dim) is {} on {}, expected {}..{} for the GPU kernels", d, p.head_dim,
           device_name(p.device), kGpuMinHeadDim, kGpuMaxHeadDim);
    check_gpu_alignment(tensors, p);
  }
  return a;
}

}  // namespace flashgen
