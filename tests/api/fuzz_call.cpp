#include "fuzz_call.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::test::fuzz {
namespace {

enum Name { kQ, kK, kV, kO, kLse, kDout, kDq, kDk, kDv, kTensors };
constexpr const char* kNames[kTensors] = {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"};

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}
double uniform_real(std::mt19937_64& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }
template <typename T, std::size_t N>
T pick(std::mt19937_64& rng, const T (&choices)[N]) {
  return choices[uniform(rng, 0, N - 1)];
}

DType dtype_of(const flashgen_tensor& t) { return static_cast<DType>(static_cast<int>(t.dtype)); }

// Element offset of logical index `i` of a view (rank 4, or 3 for lse).
std::int64_t offset(const flashgen_tensor& t, const std::array<std::int64_t, 4>& i) {
  std::int64_t at = 0;
  for (int d = 0; d < t.rank; ++d) at += i[d] * t.stride[d];
  return at;
}

template <typename F>
void for_each_index(const flashgen_tensor& t, F&& f) {
  const std::int64_t last = t.rank == 4 ? t.shape[3] : 1;
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t b = 0; b < t.shape[1]; ++b)
      for (std::int64_t c = 0; c < t.shape[2]; ++c)
        for (std::int64_t d = 0; d < last; ++d) f(std::array<std::int64_t, 4>{a, b, c, d});
}

// A view before its block exists: shape, strides and first element within the block.
struct View {
  std::array<std::int64_t, 4> shape{1, 1, 1, 1}, stride{1, 1, 1, 1};
  int rank = 4;
  DType dtype = DType::f32;
  int block = -1;
  std::int64_t first = 0;
  std::int64_t end() const {  // one past the last element
    std::int64_t last = first;
    for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * stride[d];
    return last + 1;
  }
};

enum class Layout { contiguous, heads_major, seqlen_major, padded, broadcast };
const char* to_string(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::heads_major: return "heads-major";
    case Layout::seqlen_major: return "seqlen-major";
    case Layout::padded: return "padded";
    case Layout::broadcast: return "broadcast";
  }
  return "?";
}

std::array<std::int64_t, 4> strides(Layout l, const std::array<std::int64_t, 4>& s, std::mt19937_64& rng) {
  const std::int64_t B = s[0], S = s[1], H = s[2], D = s[3];
  switch (l) {
    case Layout::heads_major: return {H * S * D, D, S * D, 1};
    case Layout::seqlen_major: return {H * D, B * H * D, D, 1};
    case Layout::padded: {
      const std::int64_t head = D + uniform(rng, 1, 5), row = H * head + uniform(rng, 0, 5), batch = S * row + uniform(rng, 0, 7);
      return {batch, row, head, 1};
    }
    case Layout::broadcast:  // an input shared by every batch or every head
      return chance(rng, 0.5) ? std::array<std::int64_t, 4>{0, H * D, D, 1} : std::array<std::int64_t, 4>{S * D, D, 0, 1};
    case Layout::contiguous: break;
  }
  return {S * H * D, H * D, D, 1};
}

Geometry random_geometry(std::mt19937_64& rng) {
  Geometry g;
  auto seqlen = [&] { return pick(rng, {std::int64_t{1}, uniform(rng, 2, 9), uniform(rng, 2, 9), uniform(rng, 10, 40)}); };
  g.batch = uniform(rng, 1, 3);
  g.seqlen_q = seqlen();
  g.seqlen_k = chance(rng, 0.3) ? g.seqlen_q : seqlen();
  g.heads_kv = uniform(rng, 1, 3);
  g.heads_q = g.heads_kv * uniform(rng, 1, 4);  // heads_kv 1: MQA
  g.head_dim = pick(rng, {1, 2, 3, 5, 8, 16, 17, 31, 32, 40, 64, 80, 96, 128, 160, 192, 256});
  if (g.head_dim >= 128) g.seqlen_q = std::min<std::int64_t>(g.seqlen_q, 17), g.seqlen_k = std::min<std::int64_t>(g.seqlen_k, 17);
  g.dtype = pick(rng, {DType::f32, DType::f16, DType::bf16});
  return g;
}

flashgen_attention_options random_options(const Geometry& g, std::mt19937_64& rng) {
  flashgen_attention_options o;
  flashgen_attention_options_init(&o);
  if (chance(rng, 0.5)) o.softmax_scale = static_cast<float>(uniform_real(rng, 0.02, 1.0));
  o.causal = chance(rng, 0.35) ? 1 : 0;
  if (chance(rng, 0.4)) o.window_left = static_cast<std::int32_t>(uniform(rng, 0, g.seqlen_k));
  // With causal the window's right side is the diagonal whatever is passed (flashgen.h).
  if (chance(rng, 0.4)) o.window_right = static_cast<std::int32_t>(uniform(rng, 0, g.seqlen_k));
  if (chance(rng, 0.4)) o.softcap = static_cast<float>(uniform_real(rng, 0.5, 20.0));
  o.deterministic = chance(rng, 0.5) ? 1 : 0;
  return o;
}

// |got - ref| <= element_rounding * |ref| + slack * max |ref| element by element
// (tests/cpu/tiled_attention_test.cpp's rule); -inf == -inf, NaN is infinitely far.
std::string close(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
                  double element_rounding, double slack, double absolute = 0) {
  if (got.size() != ref.size()) return fmt::format("{}: {} elements, expected {}", what, got.size(), ref.size());
  double max_ref = 0;
  for (double r : ref)
    if (std::isfinite(r)) max_ref = std::max(max_ref, std::abs(r));
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(ref[i]) && got[i] == ref[i]) continue;
    const double err = std::abs(got[i] - ref[i]);
    if (!(err <= element_rounding * std::abs(ref[i]) + slack * max_ref + absolute))
      return fmt::format("{}: element {} is {}, expected {} (max |ref| {})", what, i, got[i], ref[i], max_ref);
  }
  return "";
}

Problem problem_of(const FuzzCall& c) {
  Problem p;
  p.batch = c.g.batch, p.seqlen_q = c.g.seqlen_q, p.seqlen_k = c.g.seqlen_k;
  p.heads_q = c.g.heads_q, p.heads_kv = c.g.heads_kv, p.head_dim = c.g.head_dim;
  p.dtype = c.g.dtype;
  p.options.softmax_scale = c.options.softmax_scale;
  p.options.causal = c.options.causal != 0;  // folded into the window by the reference
  p.options.window_left = c.options.window_left;
  p.options.window_right = c.options.window_right;
  p.options.softcap = c.options.softcap;
  return p;
}

double rounding(DType d) { return d == DType::f32 ? 0.0 : cpu::unit_roundoff(d); }

}  // namespace

std::vector<double> read(const flashgen_tensor& t) {
  std::vector<double> out;
  for_each_index(t, [&](const std::array<std::int64_t, 4>& i) { out.push_back(cpu::load_float(t.data, dtype_of(t), offset(t, i))); });
  return out;
}

FuzzCall random_call(std::mt19937_64& rng) {
  FuzzCall c;
  c.g = random_geometry(rng);
  const Geometry& g = c.g;
  c.options = random_options(g, rng);
  const std::array<std::int64_t, 4> qs{g.batch, g.seqlen_q, g.heads_q, g.head_dim}, ks{g.batch, g.seqlen_k, g.heads_kv, g.head_dim};
  std::array<View, kTensors> views;
  int blocks = 0;
  auto single = [&](Name n, const std::array<std::int64_t, 4>& shape, bool input) {
    const Layout l = input && chance(rng, 0.15) ? Layout::broadcast
                                                : pick(rng, {Layout::contiguous, Layout::contiguous, Layout::heads_major,
                                                             Layout::seqlen_major, Layout::padded});
    views[n] = View{shape, strides(l, shape, rng), 4, g.dtype, blocks++, 0};
    return fmt::format("{} {}", kNames[n], to_string(l));
  };
  // q/k/v (and dq/dk/dv) interleaved in one (batch, seqlen, heads_q + 2 heads_kv, head_dim) block.
  auto packed = [&](Name a, Name b, Name d) {
    const std::int64_t row = (g.heads_q + 2 * g.heads_kv) * g.head_dim + uniform(rng, 0, 3);
    const std::array<std::int64_t, 4> stride{g.seqlen_q * row, row, g.head_dim, 1};
    views[a] = View{qs, stride, 4, g.dtype, blocks, 0};
    views[b] = View{ks, stride, 4, g.dtype, blocks, g.heads_q * g.head_dim};
    views[d] = View{ks, stride, 4, g.dtype, blocks, (g.heads_q + g.heads_kv) * g.head_dim};
    ++blocks;
    return fmt::format("{}/{}/{} packed (row {})", kNames[a], kNames[b], kNames[d], row);
  };
  std::vector<std::string> layout;
  const bool same_len = g.seqlen_q == g.seqlen_k;
  if (same_len && chance(rng, 0.3)) {
    layout.push_back(packed(kQ, kK, kV));
  } else {
    layout.push_back(single(kQ, qs, true));
    layout.push_back(single(kK, ks, true));
    if (chance(rng, 0.1)) {
      views[kV] = views[kK];
      layout.push_back("v = k");
    } else {
      layout.push_back(single(kV, ks, true));
    }
  }
  layout.push_back(single(kO, qs, false));
  views[kLse] = View{{g.batch, g.heads_q, g.seqlen_q, 1}, {g.heads_q * g.seqlen_q, g.seqlen_q, 1, 1}, 3, DType::f32, blocks++, 0};
  if (chance(rng, 0.1)) {
    views[kDout] = views[kO];  // inputs may share memory
    layout.push_back("dout = o");
  } else {
    layout.push_back(single(kDout, qs, true));
  }
  if (same_len && chance(rng, 0.3)) {
    layout.push_back(packed(kDq, kDk, kDv));
  } else {
    for (Name n : {kDq, kDk, kDv}) layout.push_back(single(n, n == kDq ? qs : ks, false));
  }
  c.layout = fmt::format("{}", fmt::join(layout, ", "));

  // Blocks of exactly the bytes their views span; every byte starts as poison.
  c.blocks.resize(blocks);
  for (const View& v : views) {
    Block& b = c.blocks[v.block];
    b.size = std::max(b.size, static_cast<std::size_t>(v.end()) * size_of(v.dtype));
  }
  for (Block& b : c.blocks) {
    b.bytes = std::make_unique<unsigned char[]>(b.size);
    std::memset(b.bytes.get(), kPoisonByte, b.size);
    b.covered.assign(b.size, false);
  }
  flashgen_tensor* tensors[kTensors] = {&c.q, &c.k, &c.v, &c.o, &c.lse, &c.dout, &c.dq, &c.dk, &c.dv};
  for (int n = 0; n < kTensors; ++n) {
    const View& v = views[n];
    flashgen_tensor& t = *tensors[n];
    std::memset(&t, 0, sizeof t);
    t.data = c.blocks[v.block].bytes.get() + v.first * static_cast<std::int64_t>(size_of(v.dtype));
    t.dtype = static_cast<flashgen_dtype>(v.dtype);
    t.device = FLASHGEN_CPU;
    t.rank = v.rank;
    for (int d = 0; d < 4; ++d) t.shape[d] = v.shape[d], t.stride[d] = v.stride[d];
    c.block_of.push_back(v.block);
  }
  for (int n : {kO, kLse, kDq, kDk, kDv}) {
    const flashgen_tensor& t = *tensors[n];
    Block& b = c.blocks[c.block_of[n]];
    b.output = true;
    const std::size_t elem = size_of(dtype_of(t));
    const std::size_t first = static_cast<unsigned char*>(t.data) - b.bytes.get();
    for_each_index(t, [&](const std::array<std::int64_t, 4>& i) {
      for (std::size_t byte = 0; byte < elem; ++byte) b.covered[first + offset(t, i) * elem + byte] = true;
    });
  }
  for (int n : {kQ, kK, kV, kDout})
    for_each_index(*tensors[n], [&](const std::array<std::int64_t, 4>& i) {
      cpu::store_float(tensors[n]->data, g.dtype, offset(*tensors[n], i), static_cast<float>(uniform_real(rng, -1, 1)));
    });
  if (chance(rng, 0.1)) {  // a workspace of its own: valid, and unused on the CPU
    c.blocks.push_back(Block{std::make_unique<unsigned char[]>(64), 64, false, {}});
    c.workspace = c.blocks.back().bytes.get();
    c.workspace_bytes = 64;
  }
  return c;
}

flashgen_forward_args FuzzCall::forward() const {
  flashgen_forward_args a;
  flashgen_forward_args_init(&a);
  a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse, a.options = options;
  return a;
}

flashgen_backward_args FuzzCall::backward() const {
  flashgen_backward_args a;
  flashgen_backward_args_init(&a);
  a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse, a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
  a.options = options;
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  return a;
}

std::vector<Slot> FuzzCall::slots(flashgen_forward_args& a) const {
  return {{"q", &a.q, false, block_of[kQ]},
          {"k", &a.k, false, block_of[kK]},
          {"v", &a.v, false, block_of[kV]},
          {"o", &a.o, true, block_of[kO]},
          {"lse", &a.lse, true, block_of[kLse]}};
}

std::vector<Slot> FuzzCall::slots(flashgen_backward_args& a) const {
  return {{"q", &a.q, false, block_of[kQ]},       {"k", &a.k, false, block_of[kK]},
          {"v", &a.v, false, block_of[kV]},       {"o", &a.o, false, block_of[kO]},
          {"lse", &a.lse, false, block_of[kLse]}, {"dout", &a.dout, false, block_of[kDout]},
          {"dq", &a.dq, true, block_of[kDq]},     {"dk", &a.dk, true, block_of[kDk]},
          {"dv", &a.dv, true, block_of[kDv]}};
}

std::string FuzzCall::describe() const {
  return fmt::format(
      "batch {} seqlen_q {} seqlen_k {} heads_q {} heads_kv {} head_dim {} {}; {}; scale {} causal {} window ({}, {}) "
      "softcap {} deterministic {}{}",
      g.batch, g.seqlen_q, g.seqlen_k, g.heads_q, g.heads_kv, g.head_dim, to_string(g.dtype), layout,
      options.softmax_scale, options.causal, options.window_left, options.window_right, options.softcap,
      options.deterministic, workspace != nullptr ? "; workspace 64 bytes" : "");
}

std::vector<std::vector<unsigned char>> FuzzCall::snapshot() const {
  std::vector<std::vector<unsigned char>> out;
  for (const Block& b : blocks) out.emplace_back(b.bytes.get(), b.bytes.get() + b.size);
  return out;
}

bool FuzzCall::unchanged_since(const std::vector<std::vector<unsigned char>>& before,
                               std::initializer_list<const flashgen_tensor*> except) const {
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    const bool excepted = std::any_of(except.begin(), except.end(), [&](const flashgen_tensor* t) {
      return b.bytes.get() <= t->data && t->data < b.bytes.get() + b.size;
    });
    if (!excepted && std::memcmp(b.bytes.get(), before[i].data(), b.size) != 0) return false;
  }
  return true;
}

void FuzzCall::poison_outputs(std::initializer_list<const flashgen_tensor*> outputs) {
  for (const flashgen_tensor* t : outputs)
    for (Block& b : blocks)
      if (b.bytes.get() <= t->data && t->data < b.bytes.get() + b.size) std::memset(b.bytes.get(), kPoisonByte, b.size);
}

std::int64_t FuzzCall::written_outside_outputs() const {
  std::int64_t n = 0;
  for (const Block& b : blocks)
    if (b.output)
      for (std::size_t i = 0; i < b.size; ++i) n += !b.covered[i] && b.bytes[i] != kPoisonByte;
  return n;
}

std::string check_forward(const FuzzCall& c, bool with_lse) {
  const Problem p = problem_of(c);
  const cpu::Fp64Outputs ref = cpu::standard_forward_f64(p, read(c.q), read(c.k), read(c.v));
  const double u = rounding(c.g.dtype);
  std::string why = close("o", read(c.o), ref.o, u, 1e-5);
  if (why.empty() && with_lse) why = close("lse", read(c.lse), ref.lse, 0, 1e-5);
  if (why.empty() && c.written_outside_outputs() != 0)
    why = fmt::format("{} bytes written outside the output views", c.written_outside_outputs());
  return why;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

// fp16/bf16: the backward's D_i = rowsum(dO_i ∘ O_i) reads the rounded O; with δD_i its
// error against the exact O, dQ_i moves by scale δD_i Σ_j P_ij c_ij K_j (c: the softcap's
// derivative, in (0, 1]), at most scale max|δD| max|K|, and dK_j by at most
// scale max|δD| max|Q| Σ_i P_ij <= scale max|δD| max|Q| group seqlen_q. Those bounds are
// allowed on top of tiled_attention_test.cpp's rule (which covers them only where |dQ|,
// |dK| are not much smaller than |dO| |V|: short rows, one-hot P and large head_dim give
// gradients that cancel far below the D error). dV does not read D.
std::string check_backward(const FuzzCall& c) {
  const Problem p = problem_of(c);
  const std::vector<double> q = read(c.q), k = read(c.k), v = read(c.v), dout = read(c.dout), o = read(c.o);
  const cpu::Fp64Gradients ref = cpu::standard_backward_f64(p, q, k, v, dout);
  const std::vector<double> exact_o = cpu::standard_forward_f64(p, q, k, v).o;
  double max_dd = 0;
  for (std::size_t row = 0; row * p.head_dim < o.size(); ++row) {
    double dd = 0;
    for (std::int64_t d = 0; d < p.head_dim; ++d) {
      const std::size_t i = row * p.head_dim + d;
      dd += dout[i] * (o[i] - exact_o[i]);
    }
    max_dd = std::max(max_dd, std::abs(dd));
  }
  const double scale = std::isnan(p.options.softmax_scale) ? 1.0 / std::sqrt(double(p.head_dim)) : p.options.softmax_scale;
  const double dq_d = scale * max_dd * max_abs(k);
  const double dk_d = scale * max_dd * max_abs(q) * double(p.heads_q / p.heads_kv * p.seqlen_q);
  const double u = rounding(c.g.dtype);
  constexpr double kDSlack = 4;
  std::string why = close("dq", read(c.dq), ref.dq, u, kDSlack * u + 1e-5, dq_d);
  if (why.empty()) why = close("dk", read(c.dk), ref.dk, u, kDSlack * u + 1e-5, dk_d);
  if (why.empty()) why = close("dv", read(c.dv), ref.dv, u, u + 1e-5);
  if (why.empty() && c.written_outside_outputs() != 0)
    why = fmt::format("{} bytes written outside the output views", c.written_outside_outputs());
  return why;
}

}  // namespace flashgen::test::fuzz
