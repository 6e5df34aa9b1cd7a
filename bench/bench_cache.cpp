// Kernel cache host costs (Google Benchmark; issue 3's targets):
//   disk-cache hit per kernel            <= 5 ms  (new process: source, key, read + verify)
//   memory-cache lookup                  <= 5 us
//   memory lookup + load (CUfunction)    <= 5 us  (only where a CUDA driver and GPU exist)
//   cold compile of a variant, parallel  <= 1.5 s wall on the GPU machine's 16 cores
// The kernels are the real ones of a forward+backward variant (generate_source).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "compiler/codegen.h"
#include "compiler/kernel_selection.h"
#include "runtime/cuda_device.h"
#include "runtime/kernel_cache.h"

namespace flashgen {
namespace {

// The kernels of one forward+backward variant (d128 bf16 causal, sm_90a): the
// runtime's selection when it has one, else the default tiles.
std::vector<KernelSpec> variant() {
  ProblemKey problem;
  problem.head_dim = 128;
  problem.causal = true;
  problem.seqlen_q = problem.seqlen_k = 4096;
  std::vector<KernelSpec> specs = select_forward_kernels(problem, Arch::sm_90a);
  const std::vector<KernelSpec> backward = select_backward_kernels(problem, Arch::sm_90a);
  specs.insert(specs.end(), backward.begin(), backward.end());
  if (specs.size() == 4) return specs;
  specs.clear();
  for (Pass pass : {Pass::fwd, Pass::bwd_preprocess, Pass::bwd_dkdv, Pass::bwd_dq_convert}) {
    KernelSpec s;
    s.pass = pass;
    s.head_dim = 128;
    s.block_m = pass == Pass::bwd_dkdv ? 64 : 128;
    s.block_n = 64;
    s.warps = 4;
    s.arch = Arch::sm_90a;
    s.causal = true;
    specs.push_back(s);
  }
  return specs;
}

// A cache directory filled once with the variant's kernels (compiled in parallel),
// removed when the benchmark exits.
struct PopulatedDir {
  std::filesystem::path path;
  PopulatedDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "flashgen-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
    KernelCache warm(path);
    const auto specs = variant();
    warm.get_many(specs);
  }
  ~PopulatedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::filesystem::path& populated_dir() {
  static const PopulatedDir dir;
  return dir.path;
}

KernelCacheOptions quiet(const std::filesystem::path& dir) {
  KernelCacheOptions o;
  o.dir = dir;
  o.log = [](LogLevel, const std::string&) {};
  return o;
}

// One kernel from disk in a cache whose memory level is empty, as in a new process.
void BM_DiskCacheHit(benchmark::State& state) {
  const KernelSpec spec = variant()[state.range(0)];
  const auto& dir = populated_dir();
  for (auto _ : state) {
    state.PauseTiming();
    auto cache = std::make_unique<KernelCache>(quiet(dir));
    state.ResumeTiming();
    const CompiledKernel& k = cache->get(spec);
    benchmark::DoNotOptimize(k.cubin.data());
    state.PauseTiming();
    if (!k.from_disk_cache) state.SkipWithError("expected a disk hit");
    cache.reset();
    state.ResumeTiming();
  }
  state.SetLabel(spec.uri());
}
BENCHMARK(BM_DiskCacheHit)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_MemoryCacheLookup(benchmark::State& state) {
  KernelCache cache(quiet(populated_dir()));
  const KernelSpec spec = variant()[0];
  cache.get(spec);
  for (auto _ : state) benchmark::DoNotOptimize(&cache.get(spec));
}
BENCHMARK(BM_MemoryCacheLookup)->Unit(benchmark::kMicrosecond);

void BM_MemoryCacheLookupContended(benchmark::State& state) {
  static KernelCache* cache = nullptr;
  if (state.thread_index() == 0) {
    cache = new KernelCache(quiet(populated_dir()));
    cache->get_many(variant());
  }
  const auto specs = variant();
  size_t i = state.thread_index();
  for (auto _ : state) benchmark::DoNotOptimize(&cache->get(specs[i++ % specs.size()]));
  if (state.thread_index() == 0) {
    delete cache;
    cache = nullptr;
  }
}
BENCHMARK(BM_MemoryCacheLookupContended)->Threads(2)->Unit(benchmark::kMicrosecond);

// What a launch pays before cuLaunchKernel: the current context, the memory cache, the CUfunction.
void BM_LoadFromMemory(benchmark::State& state) {
  if (!cuda_available()) {
    state.SkipWithError("no CUDA driver or device on this machine");
    return;
  }
  ensure_context(0);
  KernelCache cache(quiet(populated_dir()));
  const KernelSpec spec = variant()[0];
  cache.load(spec);
  for (auto _ : state) benchmark::DoNotOptimize(cache.load(spec).function);
}
BENCHMARK(BM_LoadFromMemory)->Unit(benchmark::kMicrosecond);

// Cold compile of the whole variant, every kernel in parallel (get_many), no disk cache.
void BM_ColdCompileVariant(benchmark::State& state) {
  const auto specs = variant();
  for (auto _ : state) {
    KernelCacheOptions o = quiet({});
    o.use_disk = false;
    KernelCache cache(o);
    benchmark::DoNotOptimize(cache.get_many(specs).data());
  }
  state.SetLabel(fmt::format("{} kernels, {} threads", specs.size(), std::thread::hardware_concurrency()));
}
BENCHMARK(BM_ColdCompileVariant)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

// Cold compile of one kernel of the variant.
void BM_ColdCompileKernel(benchmark::State& state) {
  const KernelSpec spec = variant()[state.range(0)];
  for (auto _ : state) {
    KernelCacheOptions o = quiet({});
    o.use_disk = false;
    KernelCache cache(o);
    benchmark::DoNotOptimize(cache.get(spec).cubin.data());
  }
  state.SetLabel(spec.uri());
}
BENCHMARK(BM_ColdCompileKernel)->DenseRange(0, 3)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The part of a memory miss spent before any I/O: generating the source and hashing the key.
void BM_SourceAndKey(benchmark::State& state) {
  KernelCache cache(quiet(populated_dir()));
  const KernelSpec spec = variant()[state.range(0)];
  for (auto _ : state) benchmark::DoNotOptimize(cache.key(spec));
  state.SetLabel(spec.uri());
}
BENCHMARK(BM_SourceAndKey)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace flashgen

BENCHMARK_MAIN();
