// An inference engine's loop through flashgen's C++ API, on raw CUDA buffers: a batch of
// prompts of different lengths prefilled (every prompt's keys and values appended into a
// paged KV cache in one launch over the packed rows, keys and queries rotated on the way; then
// each prompt's causal attention over its pages), then kSteps decode steps (each appends the
// new token's key and value, rotating it and the query, and attends over the cache) captured
// in one CUDA graph and replayed. The same calls on host buffers run the CPU
// backend: the reference every GPU output is checked against. Prints the decode rate.
//
// Lengths and positions live in device buffers (cu_seqlens, cache_seqlens, seqused_k): the
// graph reads them at replay, so an engine rewrites them between replays instead of
// capturing again. flashgen never synchronises; the engine does, to read results.
#include "decode_loop.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using flashgen::DType;
using flashgen::Tensor;
using bf16 = __nv_bfloat16;

constexpr std::int64_t kSeqs = 4, kHeadsQ = 8, kHeadsKv = 2, kDim = 128, kRotaryDim = 64;
constexpr std::int64_t kPage = 16, kPagesPerSeq = 16, kCapacity = kPage * kPagesPerSeq;  // 256 positions each
constexpr std::int64_t kPages = kSeqs * kPagesPerSeq + 3;  // a few the sequences do not use
constexpr std::int64_t kSteps = 32;
constexpr int kPrompt[kSeqs] = {37, 100, 5, 64};
constexpr std::int64_t kQRow = kHeadsQ * kDim, kKvRow = kHeadsKv * kDim;

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}

// The loop's inputs and outputs as host vectors; where() gives each one's address for a run.
struct Host {
  std::vector<bf16> q, k, v, qr, o;         // packed prompts: (total, heads, kDim); qr: q rotated
  std::vector<std::int32_t> cu, zero, len;  // cu_seqlens (kSeqs + 1); per sequence 0 (where prompts go), its length
  std::vector<bf16> k_cache, v_cache;       // (kPages, kPage, kHeadsKv, kDim)
  std::vector<std::int32_t> table;          // (kSeqs, kPagesPerSeq)
  std::vector<bf16> cos, sin;               // (kCapacity, kRotaryDim / 2)
  std::vector<bf16> dq, dk, dv, dqr, dout;  // decode, per step: new q, k, v; rotated q; o
  std::vector<std::int32_t> start, used;    // per step: where the new token goes; keys it attends to
};

// Device copies of a Host's vectors (uploaded), or the host vectors themselves.
class Memory {
 public:
  explicit Memory(bool device) : device_(device) {}
  ~Memory() {
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  T* operator()(std::vector<T>& host) {
    if (!device_) return host.data();
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, host.size() * sizeof(T)), "cudaMalloc");
    owned_.push_back(p);
    check_cuda(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    return static_cast<T*>(p);
  }

 private:
  bool device_;
  std::vector<void*> owned_;
};

// Every buffer of a run and the calls over them.
struct Loop {
  Host& h;
  int device;
  Memory mem;
  bf16 *q, *k, *v, *qr, *o, *k_cache, *v_cache, *cos, *sin, *dq, *dk, *dv, *dqr, *dout;
  std::int32_t *cu, *zero, *len, *table, *start, *used;

  Loop(Host& host, int dev)
      : h(host), device(dev), mem(dev != flashgen::kCpu), q(mem(h.q)), k(mem(h.k)), v(mem(h.v)), qr(mem(h.qr)),
        o(mem(h.o)), k_cache(mem(h.k_cache)), v_cache(mem(h.v_cache)), cos(mem(h.cos)), sin(mem(h.sin)),
        dq(mem(h.dq)), dk(mem(h.dk)), dv(mem(h.dv)), dqr(mem(h.dqr)), dout(mem(h.dout)), cu(mem(h.cu)),
        zero(mem(h.zero)), len(mem(h.len)), table(mem(h.table)), start(mem(h.start)), used(mem(h.used)) {}

  Tensor rows(void* p, std::int64_t n0, std::int64_t n1, std::int64_t heads) const {
    return Tensor::contiguous(p, DType::bf16, {n0, n1, heads, kDim}, device);
  }
  Tensor packed(void* p, std::int64_t total, std::int64_t heads) const {
    Tensor t = Tensor::contiguous(p, DType::bf16, {total, heads, kDim, 1}, device);
    t.rank = 3;
    t.stride = {heads * kDim, kDim, 1, 0};
    return t;
  }
  Tensor ints(std::int32_t* p, std::int64_t n0, std::int64_t n1 = 0) const {
    Tensor t = Tensor::contiguous(p, DType::i32, {n0, std::max<std::int64_t>(n1, 1), 1, 1}, device);
    t.rank = n1 > 0 ? 2 : 1;
    return t;
  }
  Tensor pages(bf16* p) const { return rows(p, kPages, kPage, kHeadsKv); }

  // Every prompt's keys and values into its pages from position 0, keys and q rotated (one
  // launch over the packed rows); then each prompt's causal attention over its pages.
  void prefill(flashgen::Runtime& rt, void* stream) {
    const std::int64_t total = h.cu.back();
    flashgen::KvAppendArgs a;
    a.k = packed(k, total, kHeadsKv);
    a.v = packed(v, total, kHeadsKv);
    a.cu_seqlens = ints(cu, kSeqs + 1);
    a.k_cache = pages(k_cache);
    a.v_cache = pages(v_cache);
    a.block_table = ints(table, kSeqs, kPagesPerSeq);
    a.cache_seqlens = ints(zero, kSeqs);
    rotary(a);
    a.q = packed(q, total, kHeadsQ);
    a.q_rotated = packed(qr, total, kHeadsQ);
    rt.append_kv(a, stream);
    for (std::int64_t s = 0; s < kSeqs; ++s) {  // its packed rows are a batch of one
      const std::int64_t first = h.cu[s], n = h.cu[s + 1] - first;
      flashgen::ForwardArgs f;
      f.q = rows(qr + first * kQRow, 1, n, kHeadsQ);
      f.o = rows(o + first * kQRow, 1, n, kHeadsQ);
      f.k = a.k_cache;
      f.v = a.v_cache;
      f.block_table = ints(table + s * kPagesPerSeq, 1, kPagesPerSeq);
      f.seqused_k = ints(len + s, 1);
      f.options.causal = true;
      rt.forward(f, stream);
    }
  }

  void rotary(flashgen::KvAppendArgs& a) const {
    for (auto [t, p] : {std::pair{&a.rotary.cos, cos}, {&a.rotary.sin, sin}}) {
      *t = Tensor::contiguous(p, DType::bf16, {kCapacity, kRotaryDim / 2, 1, 1}, device);
      t->rank = 2;
    }
  }

  // Decode step `s`: the new token's key and value appended at start (rotated, with q), then
  // its query over the first `used` keys of each sequence.
  void decode(flashgen::Runtime& rt, std::int64_t s, void* stream) {
    flashgen::KvAppendArgs a;
    a.k = rows(dk + s * kSeqs * kKvRow, kSeqs, 1, kHeadsKv);
    a.v = rows(dv + s * kSeqs * kKvRow, kSeqs, 1, kHeadsKv);
    a.k_cache = pages(k_cache);
    a.v_cache = pages(v_cache);
    a.block_table = ints(table, kSeqs, kPagesPerSeq);
    a.cache_seqlens = ints(start + s * kSeqs, kSeqs);
    rotary(a);
    a.q = rows(dq + s * kSeqs * kQRow, kSeqs, 1, kHeadsQ);
    a.q_rotated = rows(dqr + s * kSeqs * kQRow, kSeqs, 1, kHeadsQ);
    rt.append_kv(a, stream);
    flashgen::ForwardArgs f;
    f.q = a.q_rotated;
    f.k = a.k_cache;
    f.v = a.v_cache;
    f.o = rows(dout + s * kSeqs * kQRow, kSeqs, 1, kHeadsQ);
    f.block_table = a.block_table;
    f.seqused_k = ints(used + s * kSeqs, kSeqs);
    rt.forward(f, stream);
  }

  template <class T>
  void download(std::vector<T>& host, const T* p) const {
    check_cuda(cudaMemcpy(host.data(), p, host.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
};

Host make_inputs(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  const auto random = [&](std::size_t n) {
    std::vector<bf16> x(n);
    for (bf16& e : x) e = __float2bfloat16(normal(rng));
    return x;
  };
  Host h;
  h.cu = {0};
  for (int n : kPrompt) h.cu.push_back(h.cu.back() + n);
  const std::size_t total = h.cu.back();
  h.q = random(total * kQRow), h.k = random(total * kKvRow), h.v = random(total * kKvRow);
  h.qr.assign(h.q.size(), __float2bfloat16(NAN));
  h.o.assign(h.q.size(), __float2bfloat16(NAN));
  h.zero.assign(kSeqs, 0);
  h.len.assign(std::begin(kPrompt), std::end(kPrompt));
  h.k_cache = random(kPages * kPage * kKvRow), h.v_cache = random(h.k_cache.size());  // stale rows
  std::vector<std::int32_t> order(kPages);
  for (std::int32_t i = 0; i < kPages; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  h.table.assign(order.begin(), order.begin() + kSeqs * kPagesPerSeq);
  for (std::int64_t t = 0; t < kCapacity; ++t)
    for (std::int64_t j = 0; j < kRotaryDim / 2; ++j) {
      const double angle = t * std::pow(10000.0, -2.0 * j / kRotaryDim);
      h.cos.push_back(__float2bfloat16(static_cast<float>(std::cos(angle))));
      h.sin.push_back(__float2bfloat16(static_cast<float>(std::sin(angle))));
    }
  h.dq = random(kSteps * kSeqs * kQRow), h.dk = random(kSteps * kSeqs * kKvRow), h.dv = random(h.dk.size());
  h.dqr.assign(h.dq.size(), __float2bfloat16(NAN));
  h.dout.assign(h.dq.size(), __float2bfloat16(NAN));
  for (std::int64_t s = 0; s < kSteps; ++s)
    for (std::int64_t b = 0; b < kSeqs; ++b) {
      h.start.push_back(static_cast<std::int32_t>(kPrompt[b] + s));
      h.used.push_back(static_cast<std::int32_t>(kPrompt[b] + s + 1));
    }
  return h;
}

// max |got - want| over max |want| (at least 1); NaN if any entry is NaN.
double relative_error(const std::vector<bf16>& got, const std::vector<bf16>& want) {
  double error = 0, scale = 1;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = __bfloat162float(want[i]), diff = std::abs(double(__bfloat162float(got[i])) - w);
    if (std::isnan(diff)) return diff;
    error = std::max(error, diff);
    scale = std::max(scale, std::abs(w));
  }
  return error / scale;
}

}  // namespace

bool decode_loop(flashgen::Runtime& rt, unsigned seed) {
  // The reference: the whole loop on the CPU backend (bf16 host buffers).
  Host cpu = make_inputs(seed);
  {
    Loop ref(cpu, flashgen::kCpu);
    ref.prefill(rt, nullptr);
    for (std::int64_t s = 0; s < kSteps; ++s) ref.decode(rt, s, nullptr);
  }
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::printf("decode loop on the CPU backend (%lld prompts, %lld steps); no CUDA device: skipping its GPU run\n",
                static_cast<long long>(kSeqs), static_cast<long long>(kSteps));
    return true;
  }
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  Host gpu = make_inputs(seed);
  Loop run(gpu, 0);
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  run.prefill(rt, stream);
  // Step 0 eagerly compiles and loads the decode kernels; steps 1.. are captured in one graph.
  run.decode(rt, 0, stream);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (std::int64_t s = 1; s < kSteps; ++s) run.decode(rt, s, stream);
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  run.download(gpu.o, run.o);
  run.download(gpu.dout, run.dout);
  run.download(gpu.k_cache, run.k_cache);

  // The decode rate: replays of the graph (the same tokens again: appends rewrite the same rows).
  constexpr int kReplays = 20;
  cudaEvent_t begin, end;
  check_cuda(cudaEventCreate(&begin), "cudaEventCreate");
  check_cuda(cudaEventCreate(&end), "cudaEventCreate");
  check_cuda(cudaEventRecord(begin, stream), "cudaEventRecord");
  for (int r = 0; r < kReplays; ++r) check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaEventRecord(end, stream), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(end), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);

  // bf16 outputs: the GPU rounds P to bf16 and sums in another order (cuda_step.cpp's tolerance).
  const double e_prefill = relative_error(gpu.o, cpu.o), e_decode = relative_error(gpu.dout, cpu.dout);
  const double e_cache = relative_error(gpu.k_cache, cpu.k_cache);
  const double tokens = double(kSeqs) * (kSteps - 1) * kReplays;
  std::printf("decode loop (bf16, %lld prompts of 5..100 tokens, pages of %lld, heads %lld/%lld, head_dim %lld, "
              "rotary %lld): %lld steps, %lld of them in one CUDA graph: %.0f tokens/s (%.1f us per step)\n",
              static_cast<long long>(kSeqs), static_cast<long long>(kPage), static_cast<long long>(kHeadsQ),
              static_cast<long long>(kHeadsKv), static_cast<long long>(kDim), static_cast<long long>(kRotaryDim),
              static_cast<long long>(kSteps), static_cast<long long>(kSteps - 1), tokens / (ms * 1e-3),
              1e3 * ms / (kReplays * (kSteps - 1)));
  std::printf("  max |GPU - CPU| / max|CPU|: prefill o %.2e, decode o %.2e, k cache %.2e (tolerance 4e-2)\n",
              e_prefill, e_decode, e_cache);
  return e_prefill <= 4e-2 && e_decode <= 4e-2 && e_cache <= 4e-2;  // false for NaN
}
