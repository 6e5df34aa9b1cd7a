// Host time of one attention call (Google Benchmark; issue 15's target: <= 5 us per launch
// through the C++ API), on the tiny forward (1 x 128 x 4 x 64, bf16) and a decode
// step (64 sequences x 1 query over a paged cache). The parts run anywhere: validation, kernel
// selection and the launch plan (what Runtime::forward does before the driver). Where a GPU
// exists, Runtime::forward end to end on a stream that is being captured into a CUDA graph:
// the driver records the launches instead of submitting them, so the time is the host's
// alone and the GPU's speed does not enter.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

#include "compiler/kernel_selection.h"
#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "runtime/launch_plan.h"
#include "runtime/validate.h"

namespace flashgen {
namespace {

// The calls' arguments over `base`: a fake device address for the host-only parts
// (validation and planning read only the views), real device memory end to end.
ForwardArgs tiny_forward(char* base) {
  ForwardArgs a;
  const std::array<std::int64_t, 4> shape{1, 128, 4, 64};
  const std::size_t bytes = 1 * 128 * 4 * 64 * 2;
  a.q = Tensor::contiguous(base, DType::bf16, shape, 0);
  a.k = Tensor::contiguous(base + bytes, DType::bf16, shape, 0);
  a.v = Tensor::contiguous(base + 2 * bytes, DType::bf16, shape, 0);
  a.o = Tensor::contiguous(base + 3 * bytes, DType::bf16, shape, 0);
  a.lse = Tensor::contiguous3(base + 4 * bytes, DType::f32, {1, 4, 128}, 0);
  a.options.causal = true;
  return a;
}
constexpr std::size_t kTinyBytes = 4 * 128 * 4 * 64 * 2 + 4 * 128 * 4;

// Decode: 64 sequences, 32 query heads over 8 KV heads, pages of 16 rows, 8192 keys each.
constexpr int kB = 64, kHq = 32, kHkv = 8, kD = 128, kPage = 16, kPagesPerSeq = 512;
ForwardArgs decode_step(char* base) {
  ForwardArgs a;
  const std::size_t q_bytes = std::size_t{kB} * kHq * kD * 2, page_bytes = std::size_t{kPage} * kHkv * kD * 2;
  const std::int64_t pages = std::int64_t{kB} * kPagesPerSeq;
  a.q = Tensor::contiguous(base, DType::bf16, {kB, 1, kHq, kD}, 0);
  a.o = Tensor::contiguous(base + q_bytes, DType::bf16, {kB, 1, kHq, kD}, 0);
  a.lse = Tensor::contiguous3(base + 2 * q_bytes, DType::f32, {kB, kHq, 1}, 0);
  char* kv = base + 2 * q_bytes + kB * kHq * 4;
  a.k = Tensor::contiguous(kv, DType::bf16, {pages, kPage, kHkv, kD}, 0);
  a.v = Tensor::contiguous(kv + pages * page_bytes, DType::bf16, {pages, kPage, kHkv, kD}, 0);
  char* index = kv + 2 * pages * page_bytes;
  a.block_table = Tensor::contiguous(index, DType::i32, {kB, kPagesPerSeq, 1, 1}, 0);
  a.block_table.rank = 2;
  a.seqused_k = Tensor::contiguous(index + std::size_t{kB} * kPagesPerSeq * 4, DType::i32, {kB, 1, 1, 1}, 0);
  a.seqused_k.rank = 1;
  return a;
}
constexpr std::size_t kDecodeBytes = 2 * std::size_t{kB} * kHq * kD * 2 + kB * kHq * 4 +
                                     2 * std::size_t{kB} * kPagesPerSeq * kPage * kHkv * kD * 2 +
                                     std::size_t{kB} * (kPagesPerSeq + 1) * 4;

// A fake device address: validation and planning never dereference it.
char* fake_base() { return reinterpret_cast<char*>(std::uintptr_t{1} << 40); }

template <ForwardArgs (*Make)(char*)>
void BM_Validate(benchmark::State& state) {
  const ForwardArgs a = Make(fake_base());
  for (auto _ : state) benchmark::DoNotOptimize(validate_forward(a));
}

template <ForwardArgs (*Make)(char*)>
void BM_SelectAndPlan(benchmark::State& state) {
  const ForwardArgs a = Make(fake_base());
  const Problem p = validate_forward(a);
  for (auto _ : state) {
    const std::vector<KernelSpec> specs = select_forward_kernels(problem_key(p), Arch::sm_90a);
    const int splits = split_count(p, specs, 132);
    benchmark::DoNotOptimize(plan_forward(a, p, specs, splits, nullptr));
  }
}

// Runtime::forward on a capturing stream (kernels compiled and loaded by a warm-up first).
template <ForwardArgs (*Make)(char*), std::size_t kBytes>
void BM_RuntimeForwardCaptured(benchmark::State& state) {
  if (!cuda_available()) {
    state.SkipWithError("no CUDA driver or GPU: the end-to-end host time needs one");
    return;
  }
  ensure_context(0);
  const CudaDriver& d = cuda_driver();
  CUdeviceptr memory = 0;
  check_cuda(d.cuMemAlloc(&memory, kBytes), "cuMemAlloc (bench)");
  check_cuda(d.cuMemsetD32Async(memory, 0, kBytes / 4, nullptr), "cuMemsetD32Async (bench)");
  const ForwardArgs a = Make(reinterpret_cast<char*>(memory));
  CUstream stream = nullptr;
  check_cuda(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  Runtime rt;
  rt.forward(a, stream);
  check_cuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  // Captures of a bounded length: a graph of millions of nodes would time the driver's bookkeeping.
  constexpr int kPerCapture = 256;
  int recorded = 0;
  CUgraph graph = nullptr;
  check_cuda(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  for (auto _ : state) {
    rt.forward(a, stream);
    if (++recorded == kPerCapture) {
      state.PauseTiming();
      check_cuda(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
      d.cuGraphDestroy(graph);
      check_cuda(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
      recorded = 0;
      state.ResumeTiming();
    }
  }
  check_cuda(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  d.cuGraphDestroy(graph);
  d.cuStreamDestroy(stream);
  d.cuMemFree(memory);
}

BENCHMARK(BM_Validate<tiny_forward>)->Name("validate/tiny_forward");
BENCHMARK(BM_Validate<decode_step>)->Name("validate/decode_paged");
BENCHMARK(BM_SelectAndPlan<tiny_forward>)->Name("select_and_plan/tiny_forward");
BENCHMARK(BM_SelectAndPlan<decode_step>)->Name("select_and_plan/decode_paged");
BENCHMARK(BM_RuntimeForwardCaptured<tiny_forward, kTinyBytes>)->Name("runtime_forward_captured/tiny_forward");
BENCHMARK(BM_RuntimeForwardCaptured<decode_step, kDecodeBytes>)->Name("runtime_forward_captured/decode_paged");

}  // namespace
}  // namespace flashgen

BENCHMARK_MAIN();
