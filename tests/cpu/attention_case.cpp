#include "attention_case.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "runtime/cpu/dtype_convert.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using Storage = std::shared_ptr<std::vector<unsigned char>>;

Storage nan_storage(DType dtype, std::int64_t elements) {
  auto s = std::make_shared<std::vector<unsigned char>>(static_cast<std::size_t>(elements) * size_of(dtype));
  for (std::int64_t i = 0; i < elements; ++i)
    cpu::store_float(s->data(), dtype, i, std::numeric_limits<float>::quiet_NaN());
  return s;
}

void poison(const Storage& s, DType dtype) {
  const auto elements = static_cast<std::int64_t>(s->size() / size_of(dtype));
  for (std::int64_t i = 0; i < elements; ++i)
    cpu::store_float(s->data(), dtype, i, std::numeric_limits<float>::quiet_NaN());
}

// Strides of a (batch, seqlen, heads, head_dim) tensor in `layout` and the elements its storage needs.
struct Placement {
  std::array<std::int64_t, 4> stride;
  std::int64_t elements;
};

Placement place(Layout layout, std::int64_t batch, std::int64_t seqlen, std::int64_t heads, std::int64_t dim) {
  switch (layout) {
    case Layout::heads_major:
      return {{heads * seqlen * dim, dim, seqlen * dim, 1}, batch * heads * seqlen * dim};
    case Layout::padded: {
      const std::int64_t head_pitch = dim + 3, row_pitch = heads * head_pitch + 5, batch_pitch = seqlen * row_pitch + 7;
      return {{batch_pitch, row_pitch, head_pitch, 1}, batch * batch_pitch};
    }
    case Layout::contiguous:
    case Layout::packed_qkv:
      break;
  }
  return {{seqlen * heads * dim, heads * dim, dim, 1}, batch * seqlen * heads * dim};
}

Buffer make_buffer(const Storage& storage, std::int64_t first_element, DType dtype, std::array<std::int64_t, 4> shape,
                   std::array<std::int64_t, 4> stride) {
  Tensor t;
  t.data = storage->data() + first_element * static_cast<std::int64_t>(size_of(dtype));
  t.dtype = dtype;
  t.rank = 4;
  t.shape = shape;
  t.stride = stride;
  return {storage, t};
}

Buffer own_buffer(Layout layout, DType dtype, std::int64_t batch, std::int64_t seqlen, std::int64_t heads,
                  std::int64_t dim) {
  const Placement at = place(layout, batch, seqlen, heads, dim);
  return make_buffer(nan_storage(dtype, at.elements), 0, dtype, {batch, seqlen, heads, dim}, at.stride);
}

// q, k, v (or dq, dk, dv) side by side in the heads dimension of one buffer, as a fused QKV projection writes them.
std::array<Buffer, 3> packed_buffers(DType dtype, const Shape& s) {
  const std::int64_t heads = s.heads_q + 2 * s.heads_kv;
  const Placement at = place(Layout::contiguous, s.batch, s.seqlen_q, heads, s.head_dim);
  const Storage storage = nan_storage(dtype, at.elements);
  const std::int64_t d = s.head_dim;
  return {make_buffer(storage, 0, dtype, {s.batch, s.seqlen_q, s.heads_q, d}, at.stride),
          make_buffer(storage, s.heads_q * d, dtype, {s.batch, s.seqlen_k, s.heads_kv, d}, at.stride),
          make_buffer(storage, (s.heads_q + s.heads_kv) * d, dtype, {s.batch, s.seqlen_k, s.heads_kv, d}, at.stride)};
}

// Element offsets of a view's logical elements, in logical (row-major over shape) order.
std::vector<std::int64_t> element_offsets(const Tensor& t) {
  std::vector<std::int64_t> offsets;
  offsets.reserve(static_cast<std::size_t>(t.numel()));
  if (t.rank == 3) {
    for (std::int64_t a = 0; a < t.shape[0]; ++a)
      for (std::int64_t b = 0; b < t.shape[1]; ++b)
        for (std::int64_t c = 0; c < t.shape[2]; ++c)
          offsets.push_back(a * t.stride[0] + b * t.stride[1] + c * t.stride[2]);
    return offsets;
  }
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t b = 0; b < t.shape[1]; ++b)
      for (std::int64_t c = 0; c < t.shape[2]; ++c)
        for (std::int64_t d = 0; d < t.shape[3]; ++d)
          offsets.push_back(a * t.stride[0] + b * t.stride[1] + c * t.stride[2] + d * t.stride[3]);
  return offsets;
}

void fill_random(const Buffer& b, std::mt19937_64& rng, double magnitude) {
  std::uniform_real_distribution<double> uniform(-magnitude, magnitude);
  std::vector<double> values(static_cast<std::size_t>(b.view.numel()));
  for (double& x : values) x = uniform(rng);
  write(b, values);
}

}  // namespace

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::heads_major:
      return "heads_major";
    case Layout::padded:
      return "padded";
    case Layout::packed_qkv:
      return "packed_qkv";
  }
  return "?";
}

std::string Case::describe() const {
  const Shape& s = shape;
  return fmt::format(
      "b{} sq{} sk{} hq{} hkv{} d{} {} {} causal={} window=({},{}) softcap={} scale={} magnitude={} tiles={}x{} "
      "threads={}",
      s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, s.head_dim, flashgen::to_string(dtype), to_string(layout),
      options.causal, options.window_left, options.window_right, options.softcap, options.softmax_scale, magnitude,
      tiles.block_m, tiles.block_n, threads);
}

Problem make_problem(const Case& c) {
  Problem p;
  p.batch = c.shape.batch;
  p.seqlen_q = c.shape.seqlen_q;
  p.seqlen_k = c.shape.seqlen_k;
  p.heads_q = c.shape.heads_q;
  p.heads_kv = c.shape.heads_kv;
  p.head_dim = c.shape.head_dim;
  p.dtype = c.dtype;
  p.options = c.options;
  if (std::isnan(p.options.softmax_scale))
    p.options.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  if (p.options.causal) p.options.window_right = p.options.window_right < 0 ? 0 : std::min(p.options.window_right, 0);
  return p;
}

Tensors::Tensors(const Case& c, std::mt19937_64& rng) {
  const Shape& s = c.shape;
  const DType t = c.dtype;
  if (c.layout == Layout::packed_qkv) {
    if (s.seqlen_q != s.seqlen_k) throw std::invalid_argument("packed_qkv needs seqlen_q == seqlen_k");
    auto [pq, pk, pv] = packed_buffers(t, s);
    auto [gq, gk, gv] = packed_buffers(t, s);
    q = pq, k = pk, v = pv, dq = gq, dk = gk, dv = gv;
    o = own_buffer(Layout::contiguous, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
    dout = own_buffer(Layout::heads_major, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
  } else {
    q = own_buffer(c.layout, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
    k = own_buffer(c.layout, t, s.batch, s.seqlen_k, s.heads_kv, s.head_dim);
    v = own_buffer(c.layout, t, s.batch, s.seqlen_k, s.heads_kv, s.head_dim);
    o = own_buffer(c.layout, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
    dout = own_buffer(c.layout, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
    dq = own_buffer(c.layout, t, s.batch, s.seqlen_q, s.heads_q, s.head_dim);
    dk = own_buffer(c.layout, t, s.batch, s.seqlen_k, s.heads_kv, s.head_dim);
    dv = own_buffer(c.layout, t, s.batch, s.seqlen_k, s.heads_kv, s.head_dim);
  }
  const Storage lse_storage = nan_storage(DType::f32, s.batch * s.heads_q * s.seqlen_q);
  lse = {lse_storage, Tensor::contiguous3(lse_storage->data(), DType::f32, {s.batch, s.heads_q, s.seqlen_q})};
  for (const Buffer* b : {&q, &k, &v, &dout}) fill_random(*b, rng, c.magnitude);
}

ForwardArgs Tensors::forward_args(const AttentionOptions& options) const {
  ForwardArgs a;
  a.q = q.view, a.k = k.view, a.v = v.view, a.o = o.view, a.lse = lse.view;
  a.options = options;
  return a;
}

BackwardArgs Tensors::backward_args(const AttentionOptions& options) const {
  BackwardArgs a;
  a.q = q.view, a.k = k.view, a.v = v.view, a.o = o.view, a.lse = lse.view, a.dout = dout.view;
  a.dq = dq.view, a.dk = dk.view, a.dv = dv.view;
  a.options = options;
  return a;
}

void Tensors::poison_outputs() {
  poison(o.storage, o.view.dtype);
  poison(lse.storage, DType::f32);
  poison(dq.storage, dq.view.dtype);
  if (dk.storage != dq.storage) poison(dk.storage, dk.view.dtype);
  if (dv.storage != dq.storage) poison(dv.storage, dv.view.dtype);
}

std::vector<double> read(const Buffer& b) {
  std::vector<double> values;
  for (std::int64_t offset : element_offsets(b.view))
    values.push_back(cpu::load_float(b.view.data, b.view.dtype, offset));
  return values;
}

void write(const Buffer& b, const std::vector<double>& values) {
  const std::vector<std::int64_t> offsets = element_offsets(b.view);
  for (std::size_t i = 0; i < offsets.size(); ++i)
    cpu::store_float(b.view.data, b.view.dtype, offsets[i], static_cast<float>(values[i]));
}

std::int64_t Tensors::written_outside_outputs() const {
  const std::vector<const Buffer*> outputs{&o, &lse, &dq, &dk, &dv};
  std::int64_t outside = 0;
  for (const Buffer* owner : outputs) {
    const DType dtype = owner->view.dtype;
    const auto elements = static_cast<std::int64_t>(owner->storage->size() / size_of(dtype));
    std::vector<bool> covered(static_cast<std::size_t>(elements), false);
    for (const Buffer* b : outputs) {
      if (b->storage != owner->storage) continue;
      const std::int64_t base =
          (static_cast<unsigned char*>(b->view.data) - b->storage->data()) / static_cast<std::int64_t>(size_of(dtype));
      for (std::int64_t offset : element_offsets(b->view)) covered[static_cast<std::size_t>(base + offset)] = true;
    }
    for (std::int64_t i = 0; i < elements; ++i)
      if (!covered[static_cast<std::size_t>(i)] && !std::isnan(cpu::load_float(owner->storage->data(), dtype, i)))
        ++outside;
  }
  return outside;  // a storage shared by several outputs is counted once per output: still 0 when clean
}

Difference compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Difference d;
  if (got.size() != ref.size()) {
    d.max_abs = std::numeric_limits<double>::infinity();
    return d;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(ref[i])) d.max_ref = std::max(d.max_ref, std::abs(ref[i]));
    double diff;
    if (std::isnan(got[i]) || std::isnan(ref[i]))
      diff = std::numeric_limits<double>::infinity();
    else if (got[i] == ref[i])
      diff = 0;  // also -inf == -inf
    else
      diff = std::abs(got[i] - ref[i]);
    if (d.worst < 0 || diff > d.max_abs) {
      d.worst = static_cast<std::int64_t>(i);
      d.max_abs = diff;
    }
  }
  return d;
}

void expect_close(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
                  double element_rounding, double slack) {
  const double max_ref = compare(got, ref).max_ref;
  ASSERT_EQ(got.size(), ref.size()) << what;
  double worst_excess = -1;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool both_minus_inf = std::isinf(ref[i]) && got[i] == ref[i];
    const double err = both_minus_inf ? 0 : std::abs(got[i] - ref[i]);
    const double excess = std::isnan(err) ? INFINITY : err - element_rounding * std::abs(ref[i]) - slack * max_ref;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " got " << got[worst] << " expected " << ref[worst]
                               << " (max |ref| " << max_ref << ")";
}

void expect_tiled_close(DType dtype, const Results& got, const Results& ref) {
  // fp32: agreement to 1e-5 of the largest value. fp16/bf16: outputs are rounded once to
  // the dtype (u |ref|), and backward's D = rowsum(dO ∘ O) reads the rounded O: an error
  // of u·Σ|dO∘O| per row that dS = P∘(dP − D) carries into dQ = Σ dS K and dK = Σ dSᵀ Q,
  // where the terms cancel, so it is measured against max |ref| with a factor
  // (kDSlack; with half of it, 400 random runs of every fp16/bf16 case all passed; with a
  // factor 1 about 4 % of the softcap case failed, the reason for the factor). dV does
  // not read D. lse stays fp32.
  const double u = dtype == DType::f32 ? 0.0 : cpu::unit_roundoff(dtype);
  constexpr double kDSlack = 4;
  expect_close("o", got.o, ref.o, u, 1e-5);
  expect_close("lse", got.lse, ref.lse, 0, 1e-5);
  expect_close("dq", got.dq, ref.dq, u, kDSlack * u + 1e-5);
  expect_close("dk", got.dk, ref.dk, u, kDSlack * u + 1e-5);
  expect_close("dv", got.dv, ref.dv, u, u + 1e-5);
}

const char* to_string(Backend backend) { return backend == Backend::standard ? "standard" : "tiled"; }

void run_forward(Backend backend, const Case& c, const Tensors& t) {
  const ForwardArgs args = t.forward_args(c.options);
  if (backend == Backend::standard)
    cpu::standard_forward(args, make_problem(c), c.threads);
  else
    cpu::tiled_forward(args, make_problem(c), c.threads, c.tiles);
}

void run_backward(Backend backend, const Case& c, const Tensors& t) {
  const BackwardArgs args = t.backward_args(c.options);
  if (backend == Backend::standard)
    cpu::standard_backward(args, make_problem(c), c.threads);
  else
    cpu::tiled_backward(args, make_problem(c), c.threads, c.tiles);
}

std::uint64_t fresh_seed() { return test_seed(); }

}  // namespace flashgen::test
