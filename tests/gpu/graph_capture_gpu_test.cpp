// CUDA-graph capture of an engine's step: a prefill over packed prompts (varlen forward),
// its backward, and a decode step over a paged KV cache with per-sequence key counts (the new
// token's key and value appended to the cache first, rotated with q), all
// enqueued by one Runtime on a stream captured in the strictest mode (any synchronising or
// otherwise unsafe call inside flashgen fails the capture). The graph is then replayed with
// new inputs and new sequence lengths written into the same device buffers, and each replay
// must equal, bit for bit, the same calls run eagerly on those inputs: the launches read
// lengths, offsets and pages on the device and nothing of the captured problem is stale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "device_buffer.h"
#include "element_values.h"
#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

constexpr int kBatch = 3, kHeadsQ = 8, kHeadsKv = 2, kHeadDim = 128;
constexpr int kMaxPrompt = 256, kPackedRows = 700;               // prefill: lengths <= kMaxPrompt, packed in kPackedRows
constexpr int kPageSize = 16, kPagesPerSeq = 32;                 // decode: up to 512 keys per sequence
constexpr int kPages = kBatch * kPagesPerSeq + 5;
constexpr int kRotaryDim = 64, kPositions = kPageSize * kPagesPerSeq;
constexpr DType kType = DType::bf16;

Tensor rows3(void* data, std::int64_t rows, std::int64_t heads) {
  Tensor t = Tensor::contiguous(data, kType, {rows, heads, kHeadDim, 1}, 0);
  t.rank = 3;
  t.stride = {heads * kHeadDim, kHeadDim, 1, 0};
  return t;
}
Tensor ints(void* data, std::int64_t n0, std::int64_t n1 = 0) {
  Tensor t = Tensor::contiguous(data, DType::i32, {n0, std::max<std::int64_t>(n1, 1), 1, 1}, 0);
  t.rank = n1 > 0 ? 2 : 1;
  return t;
}

// Every buffer of the step, with the call arguments that name them.
struct Step {
  DeviceBuffer q{kPackedRows * kHeadsQ * kHeadDim * 2}, k{kPackedRows * kHeadsKv * kHeadDim * 2},
      v{kPackedRows * kHeadsKv * kHeadDim * 2}, o{kPackedRows * kHeadsQ * kHeadDim * 2},
      lse{kHeadsQ * kPackedRows * 4}, dout{kPackedRows * kHeadsQ * kHeadDim * 2},
      dq{kPackedRows * kHeadsQ * kHeadDim * 2}, dk{kPackedRows * kHeadsKv * kHeadDim * 2},
      dv{kPackedRows * kHeadsKv * kHeadDim * 2}, cu{(kBatch + 1) * 4};
  DeviceBuffer dec_q{kBatch * kHeadsQ * kHeadDim * 2}, dec_o{kBatch * kHeadsQ * kHeadDim * 2},
      dec_lse{kBatch * kHeadsQ * 4}, cache_k{kPages * kPageSize * kHeadsKv * kHeadDim * 2},
      cache_v{kPages * kPageSize * kHeadsKv * kHeadDim * 2}, table{kBatch * kPagesPerSeq * 4}, used{kBatch * 4};
  DeviceBuffer new_k{kBatch * kHeadsKv * kHeadDim * 2}, new_v{kBatch * kHeadsKv * kHeadDim * 2},
      dec_qr{kBatch * kHeadsQ * kHeadDim * 2}, start{kBatch * 4}, cos{kPositions * kRotaryDim}, sin{kPositions * kRotaryDim};
  ForwardArgs prefill, decode;
  KvAppendArgs append;
  BackwardArgs grad;

  Step() {
    PackedSequences seqs;
    seqs.cu_seqlens_q = seqs.cu_seqlens_k = ints(cu.data(), kBatch + 1);
    seqs.max_seqlen_q = seqs.max_seqlen_k = kMaxPrompt;
    prefill.q = rows3(q.data(), kPackedRows, kHeadsQ);
    prefill.k = rows3(k.data(), kPackedRows, kHeadsKv);
    prefill.v = rows3(v.data(), kPackedRows, kHeadsKv);
    prefill.o = rows3(o.data(), kPackedRows, kHeadsQ);
    prefill.lse = Tensor::contiguous(lse.data(), DType::f32, {kHeadsQ, kPackedRows, 1, 1}, 0);
    prefill.lse.rank = 2;
    prefill.options.causal = true;
    prefill.options.deterministic = true;  // bitwise replays: no atomics in the dQ sums
    prefill.varlen = seqs;
    grad.q = prefill.q, grad.k = prefill.k, grad.v = prefill.v, grad.o = prefill.o, grad.lse = prefill.lse;
    grad.dout = rows3(dout.data(), kPackedRows, kHeadsQ);
    grad.dq = rows3(dq.data(), kPackedRows, kHeadsQ);
    grad.dk = rows3(dk.data(), kPackedRows, kHeadsKv);
    grad.dv = rows3(dv.data(), kPackedRows, kHeadsKv);
    grad.options = prefill.options;
    grad.varlen = seqs;
    append.k = Tensor::contiguous(new_k.data(), kType, {kBatch, 1, kHeadsKv, kHeadDim}, 0);
    append.v = Tensor::contiguous(new_v.data(), kType, {kBatch, 1, kHeadsKv, kHeadDim}, 0);
    append.k_cache = Tensor::contiguous(cache_k.data(), kType, {kPages, kPageSize, kHeadsKv, kHeadDim}, 0);
    append.v_cache = Tensor::contiguous(cache_v.data(), kType, {kPages, kPageSize, kHeadsKv, kHeadDim}, 0);
    append.block_table = ints(table.data(), kBatch, kPagesPerSeq);
    append.cache_seqlens = ints(start.data(), kBatch);
    for (auto [t, b] : {std::pair{&append.rotary.cos, &cos}, {&append.rotary.sin, &sin}}) {
      *t = Tensor::contiguous(b->data(), kType, {kPositions, kRotaryDim / 2, 1, 1}, 0);
      t->rank = 2;
    }
    append.q = Tensor::contiguous(dec_q.data(), kType, {kBatch, 1, kHeadsQ, kHeadDim}, 0);
    append.q_rotated = Tensor::contiguous(dec_qr.data(), kType, {kBatch, 1, kHeadsQ, kHeadDim}, 0);
    decode.q = append.q_rotated;
    decode.o = Tensor::contiguous(dec_o.data(), kType, {kBatch, 1, kHeadsQ, kHeadDim}, 0);
    decode.lse = Tensor::contiguous3(dec_lse.data(), DType::f32, {kBatch, kHeadsQ, 1}, 0);
    decode.k = Tensor::contiguous(cache_k.data(), kType, {kPages, kPageSize, kHeadsKv, kHeadDim}, 0);
    decode.v = Tensor::contiguous(cache_v.data(), kType, {kPages, kPageSize, kHeadsKv, kHeadDim}, 0);
    decode.block_table = ints(table.data(), kBatch, kPagesPerSeq);
    decode.seqused_k = ints(used.data(), kBatch);
  }

  // New values everywhere, new prompt lengths (one of them empty some of the time) and new
  // cache lengths and pages; outputs poisoned.
  void randomize(std::mt19937& rng) {
    auto fill = [&](DeviceBuffer& b) {
      const std::vector<std::uint16_t> bits = to_bits(kType, random_values(rng, b.bytes() / 2, 1.0f, kType));
      b.upload(bits.data(), b.bytes());
    };
    for (DeviceBuffer* b : {&q, &k, &v, &dout, &dec_q, &cache_k, &cache_v, &new_k, &new_v, &cos, &sin}) fill(*b);
    std::uniform_int_distribution<int> prompt(0, kMaxPrompt), keys(1, kPageSize * kPagesPerSeq);
    std::vector<int> cu_host(kBatch + 1, 0), used_host(kBatch);
    for (int b = 0; b < kBatch; ++b) cu_host[b + 1] = cu_host[b] + prompt(rng);
    for (int& n : used_host) n = keys(rng);
    std::vector<int> pages(kPages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    pages.resize(kBatch * kPagesPerSeq);
    cu.upload(cu_host.data(), cu.bytes());
    used.upload(used_host.data(), used.bytes());
    std::vector<int> start_host(used_host);  // the new token is each sequence's last key
    for (int& n : start_host) --n;
    start.upload(start_host.data(), start.bytes());
    table.upload(pages.data(), table.bytes());
    for (DeviceBuffer* b : outputs_of()) b->fill_nan();
  }

  // What the step writes (the caches too: the append's rows).
  std::vector<DeviceBuffer*> outputs_of() { return {&o, &lse, &dq, &dk, &dv, &dec_o, &dec_lse, &dec_qr}; }

  void enqueue(Runtime& rt, CUstream stream) {
    rt.forward(prefill, stream);
    rt.backward(grad, stream);
    rt.append_kv(append, stream);
    rt.forward(decode, stream);
  }

  std::vector<std::vector<std::uint8_t>> outputs() {
    std::vector<std::vector<std::uint8_t>> out;
    std::vector<DeviceBuffer*> written = outputs_of();
    written.push_back(&cache_k);
    written.push_back(&cache_v);
    for (const DeviceBuffer* b : written) {
      out.emplace_back(b->bytes());
      b->download(out.back().data(), b->bytes());
    }
    return out;
  }
};

TEST(GraphCaptureGpu, PrefillBackwardAppendAndDecodeReplayWithNewInputsAndLengths) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
  ensure_context(0);
  const CudaDriver& d = cuda_driver();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 rng(seed);
  CUstream stream = nullptr;
  check_cuda(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  Runtime rt;
  Step step;

  // Warm-up: kernels compiled and loaded outside the capture.
  step.randomize(rng);
  step.enqueue(rt, stream);
  check_cuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize (warm-up)");

  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  check_cuda(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  try {
    step.enqueue(rt, stream);
  } catch (...) {
    d.cuStreamEndCapture(stream, &graph);
    throw;
  }
  check_cuda(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture (flashgen did something capture forbids)");
  check_cuda(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");

  std::vector<std::vector<std::uint8_t>> previous;
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(fmt::format("replay {}", replay));
    step.randomize(rng);
    check_cuda(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check_cuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize (replay)");
    const auto replayed = step.outputs();
    // The same inputs (randomize poisoned only the outputs), run eagerly.
    for (DeviceBuffer* b : step.outputs_of()) b->fill_nan();
    step.enqueue(rt, stream);
    check_cuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize (eager)");
    const auto eager = step.outputs();
    const char* names[] = {"o", "lse", "dq", "dk", "dv", "decode o", "decode lse", "rotated q", "k cache", "v cache"};
    for (std::size_t i = 0; i < eager.size(); ++i) {
      EXPECT_TRUE(replayed[i] == eager[i]) << names[i] << ": the replay differs from the eager run";
      if (!previous.empty()) {
        EXPECT_FALSE(replayed[i] == previous[i]) << names[i] << ": unchanged since the last replay";
      }
    }
    previous = replayed;
  }
  d.cuGraphExecDestroy(exec);
  d.cuGraphDestroy(graph);
  d.cuStreamDestroy(stream);
}

}  // namespace
}  // namespace flashgen::test
