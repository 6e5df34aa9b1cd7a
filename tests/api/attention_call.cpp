#include "attention_call.h"

#include <cstring>
#include <iostream>

namespace flashgen::test {

ForwardArgs AttentionCall::forward() const {
  ForwardArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.lse = lse;
  a.options = options;
  return a;
}

BackwardArgs AttentionCall::backward() const {
  BackwardArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.lse = lse;
  a.dout = dout;
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  a.options = options;
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  return a;
}

static std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

template <typename T, std::size_t N>
static T pick(std::mt19937_64& rng, const T (&choices)[N]) {
  return choices[uniform(rng, 0, N - 1)];
}

static Geometry random_sizes(std::mt19937_64& rng) {
  Geometry g;
  g.batch = uniform(rng, 2, 3);
  g.seqlen_q = uniform(rng, 2, 37);
  g.seqlen_k = uniform(rng, 2, 37);
  g.heads_kv = uniform(rng, 1, 3);
  g.heads_q = g.heads_kv * uniform(rng, 1, 4);
  return g;
}

Geometry random_cpu_geometry(std::mt19937_64& rng) {
  Geometry g = random_sizes(rng);
  g.head_dim = pick(rng, {1, 3, 17, 32, 40, 64, 80, 96, 128, 160});
  g.dtype = pick(rng, {DType::f32, DType::f16, DType::bf16});
  g.device = kCpu;
  return g;
}

Geometry random_device_geometry(std::mt19937_64& rng) {
  Geometry g = random_sizes(rng);
  g.head_dim = pick(rng, {32, 64, 80, 96, 128, 160, 192, 256});
  g.dtype = pick(rng, {DType::f16, DType::bf16});
  g.device = 0;
  return g;
}

Tensor CallFactory::tensor(const Geometry& g, DType dtype, std::array<std::int64_t, 4> shape, int rank) {
  const std::int64_t numel = shape[0] * shape[1] * shape[2] * (rank == 4 ? shape[3] : 1);
  void* data = nullptr;
  if (g.device == kCpu) {
    const std::size_t words = (static_cast<std::size_t>(numel) * size_of(dtype) + 7) / 8;
    storage_.push_back(std::make_unique<std::uint64_t[]>(words));
    data = storage_.back().get();
  } else {
    data = reinterpret_cast<void*>(next_fake_address_);
    next_fake_address_ += std::uintptr_t{1} << 32;
  }
  if (rank == 3) return Tensor::contiguous3(data, dtype, {shape[0], shape[1], shape[2]}, g.device);
  return Tensor::contiguous(data, dtype, shape, g.device);
}

AttentionCall CallFactory::make(const Geometry& g) {
  AttentionCall c;
  c.geometry = g;
  const std::array<std::int64_t, 4> qshape{g.batch, g.seqlen_q, g.heads_q, g.head_dim};
  const std::array<std::int64_t, 4> kshape{g.batch, g.seqlen_k, g.heads_kv, g.head_dim};
  c.q = tensor(g, g.dtype, qshape, 4);
  c.k = tensor(g, g.dtype, kshape, 4);
  c.v = tensor(g, g.dtype, kshape, 4);
  c.o = tensor(g, g.dtype, qshape, 4);
  c.lse = tensor(g, DType::f32, {g.batch, g.heads_q, g.seqlen_q, 1}, 3);
  c.dout = tensor(g, g.dtype, qshape, 4);
  c.dq = tensor(g, g.dtype, qshape, 4);
  c.dk = tensor(g, g.dtype, kshape, 4);
  c.dv = tensor(g, g.dtype, kshape, 4);
  return c;
}

RandomSource::~RandomSource() {
  if (::testing::Test::HasFailure()) std::cerr << "random seed of the failed test: " << seed << "\n";
}

flashgen_tensor to_c(const Tensor& t) {
  flashgen_tensor c;
  std::memset(&c, 0, sizeof c);
  c.data = t.data;
  const std::int32_t dtype = static_cast<std::int32_t>(t.dtype);  // any value, as an FFI caller may pass
  std::memcpy(&c.dtype, &dtype, sizeof dtype);
  c.device = t.device;
  c.rank = t.rank;
  for (int i = 0; i < 4; ++i) {
    c.shape[i] = t.shape[i];
    c.stride[i] = t.stride[i];
  }
  return c;
}

static flashgen_attention_options to_c(const AttentionOptions& o) {
  flashgen_attention_options c;
  c.softmax_scale = o.softmax_scale;
  c.causal = o.causal ? 1 : 0;
  c.window_left = o.window_left;
  c.window_right = o.window_right;
  c.softcap = o.softcap;
  c.deterministic = o.deterministic ? 1 : 0;
  return c;
}

flashgen_forward_args to_c_forward(const AttentionCall& call) {
  flashgen_forward_args a;
  flashgen_forward_args_init(&a);
  a.q = to_c(call.q);
  a.k = to_c(call.k);
  a.v = to_c(call.v);
  a.o = to_c(call.o);
  a.lse = to_c(call.lse);
  a.options = to_c(call.options);
  return a;
}

flashgen_backward_args to_c_backward(const AttentionCall& call) {
  flashgen_backward_args a;
  flashgen_backward_args_init(&a);
  a.q = to_c(call.q);
  a.k = to_c(call.k);
  a.v = to_c(call.v);
  a.o = to_c(call.o);
  a.lse = to_c(call.lse);
  a.dout = to_c(call.dout);
  a.dq = to_c(call.dq);
  a.dk = to_c(call.dk);
  a.dv = to_c(call.dv);
  a.options = to_c(call.options);
  a.workspace = call.workspace;
  a.workspace_bytes = call.workspace_bytes;
  return a;
}

}  // namespace flashgen::test
