// The kernel half of `flashgen demo`: the problem's forward and backward kernels
// generated and compiled through the cache (on any machine), and where a GPU is
// present, run and compared with standard attention computed on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "runtime/autotune_gpu.h"
#include "runtime/autotune_selection.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cpu/parallel_for.h"
#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/gpu_attention.h"
#include "runtime/kernel_cache.h"
#include "runtime/validate.h"
#include "tools/flashgen/demo.h"

namespace flashgen::cli {
namespace {

// One tensor's data on the host (fp32 values of the rounded 16-bit data) and on the device.
struct Buffer {
  std::vector<float> host;
  std::vector<std::uint16_t> bits;
  CUdeviceptr device = 0;
  ~Buffer() {
    if (device) cuda_driver().cuMemFree(device);
  }
};

void upload(Buffer& b, DType t, std::size_t n, std::mt19937_64* rng) {
  b.host.assign(n, 0.0f);
  b.bits.assign(n, 0);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = rng ? normal(*rng) : std::nanf("");
    b.bits[i] = t == DType::bf16 ? cpu::float_to_bf16_bits(x) : cpu::float_to_half_bits(x);
    b.host[i] = cpu::load_float(b.bits.data(), t, static_cast<std::int64_t>(i));
  }
  check_cuda(cuda_driver().cuMemAlloc(&b.device, n * 2), "cuMemAlloc");
  check_cuda(cuda_driver().cuMemcpyHtoD(b.device, b.bits.data(), n * 2), "cuMemcpyHtoD");
}

std::vector<float> download(const Buffer& b, DType t, std::size_t n) {
  std::vector<std::uint16_t> bits(n);
  check_cuda(cuda_driver().cuMemcpyDtoH(bits.data(), b.device, n * 2), "cuMemcpyDtoH");
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = cpu::load_float(bits.data(), t, static_cast<std::int64_t>(i));
  return out;
}

// max |a - b| / max |b|
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return std::isnan(diff) ? INFINITY : diff / scale;
}

void print_kernels(const std::vector<const CompiledKernel*>& kernels, double wall_ms) {
  for (const CompiledKernel* k : kernels) {
    const KernelResources& r = k->resources;
    fmt::print("    {:<52} {:>16}  {:>3} regs  {:>6} B smem  {} spills  {}\n", k->spec.uri(),
               k->from_disk_cache ? "disk-cache hit" : fmt::format("compiled {:.0f} ms", k->compile_ms), r.registers,
               k->spec.shared_memory_bytes(), r.spill_stores + r.spill_loads,
               !k->spec.uses_tensor_cores() ? "" : k->spec.uses_wgmma() ? "wgmma" : "mma.sync");
  }
  fmt::print("    {} kernels ready in {:.0f} ms wall (compiled in parallel, cached for the next run)\n", kernels.size(),
             wall_ms);
}

int run_on_gpu(const DemoOptions& d, DType dtype, std::uint64_t seed) {
  ensure_context(0);
  std::mt19937_64 rng(seed + 1);
  const std::array<std::int64_t, 4> shape{d.batch, d.seqlen, d.heads, d.head_dim};
  const auto n = static_cast<std::size_t>(d.batch * d.seqlen * d.heads * d.head_dim);
  const auto rows = static_cast<std::size_t>(d.batch * d.heads * d.seqlen);
  Buffer q, k, v, dout, o, dq, dk, dv, lse;
  for (Buffer* b : {&q, &k, &v, &dout}) upload(*b, dtype, n, &rng);
  for (Buffer* b : {&o, &dq, &dk, &dv}) upload(*b, dtype, n, nullptr);  // NaN-poisoned outputs
  check_cuda(cuda_driver().cuMemAlloc(&lse.device, rows * 4), "cuMemAlloc");

  auto view = [&](Buffer& b, DType t = DType::f32, int dev = 0) {
    return Tensor::contiguous(dev == kCpu ? static_cast<void*>(b.host.data()) : reinterpret_cast<void*>(b.device),
                              dev == kCpu ? t : dtype, shape, dev);
  };
  ForwardArgs f;
  f.q = view(q), f.k = view(k), f.v = view(v), f.o = view(o);
  f.lse = Tensor::contiguous3(reinterpret_cast<void*>(lse.device), DType::f32, {d.batch, d.heads, d.seqlen}, 0);
  f.options.causal = d.causal;
  BackwardArgs bw;
  bw.q = f.q, bw.k = f.k, bw.v = f.v, bw.o = f.o, bw.lse = f.lse, bw.dout = view(dout);
  bw.dq = view(dq), bw.dk = view(dk), bw.dv = view(dv);
  bw.options = f.options;

  Runtime rt;
  auto timed = [&](auto&& fn) {
    fn();  // first call loads the modules
    check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
    const auto start = std::chrono::steady_clock::now();
    fn();
    check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  const double fwd_ms = timed([&] { rt.forward(f, nullptr); });
  const double bwd_ms = timed([&] { rt.backward(bw, nullptr); });

  // Reference: standard attention (fp64 accumulation) on the same rounded inputs.
  Buffer ro, rlse, rdq, rdk, rdv;
  for (Buffer* b : {&ro, &rdq, &rdk, &rdv}) b->host.assign(n, 0.0f);
  rlse.host.assign(rows, 0.0f);
  ForwardArgs rf;
  rf.q = view(q, DType::f32, kCpu), rf.k = view(k, DType::f32, kCpu), rf.v = view(v, DType::f32, kCpu);
  rf.o = view(ro, DType::f32, kCpu);
  rf.lse = Tensor::contiguous3(rlse.host.data(), DType::f32, {d.batch, d.heads, d.seqlen});
  rf.options = f.options;
  const int threads = cpu::resolve_threads(d.threads);
  cpu::standard_forward(rf, validate_forward(rf), threads);
  BackwardArgs rb;
  rb.q = rf.q, rb.k = rf.k, rb.v = rf.v, rb.o = rf.o, rb.lse = rf.lse, rb.dout = view(dout, DType::f32, kCpu);
  rb.dq = view(rdq, DType::f32, kCpu), rb.dk = view(rdk, DType::f32, kCpu), rb.dv = view(rdv, DType::f32, kCpu);
  rb.options = f.options;
  cpu::standard_backward(rb, validate_backward(rb), threads);

  const double fwd_flops = 4.0 * d.batch * d.heads * d.seqlen * d.seqlen * d.head_dim * (d.causal ? 0.5 : 1.0);
  fmt::print("  GPU       forward {:.3f} ms ({:.0f} TFLOP/s), backward {:.3f} ms ({:.0f} TFLOP/s)\n", fwd_ms,
             fwd_flops / fwd_ms * 1e-9, bwd_ms, 2.5 * fwd_flops / bwd_ms * 1e-9);
  // A sanity bound (a few roundings of the 16-bit dtype, relative to the tensor's largest
  // value); the exact FlashAttention rule is what `ctest -L gpu` checks.
  const double bound = 8 * cpu::unit_roundoff(dtype);
  bool ok = true;
  std::string line;
  for (auto [name, gpu, ref] : {std::tuple{"O", &o, &ro}, {"dQ", &dq, &rdq}, {"dK", &dk, &rdk}, {"dV", &dv, &rdv}}) {
    const double err = relative_error(download(*gpu, dtype, n), ref->host);
    ok = ok && err <= bound;
    line += fmt::format("  {} {:.1e}", name, err);
  }
  std::vector<float> lse_gpu(rows);
  check_cuda(cuda_driver().cuMemcpyDtoH(lse_gpu.data(), lse.device, rows * 4), "cuMemcpyDtoH");
  double lse_err = 0;
  for (std::size_t i = 0; i < rows; ++i) lse_err = std::max(lse_err, std::abs(double(lse_gpu[i]) - rlse.host[i]));
  ok = ok && lse_err <= 1e-3;
  fmt::print("  max |GPU - standard| / max |standard| {}  lse {:.1e} (abs)   (bound {:.0e})\n", line, lse_err, bound);
  fmt::print("  result    {}\n", ok ? "OK: generated kernels agree with standard attention"
                                      : "FAILED: generated kernels differ from standard attention");
  return ok ? 0 : 1;
}

}  // namespace

int run_demo_kernels(const DemoOptions& d, std::uint64_t seed) {
  const bool gpu = cuda_available();
  const Arch arch = gpu ? device_arch(0) : Arch::sm_90a;
  const DType dtype = d.dtype == DType::f32 ? DType::bf16 : d.dtype;
  ProblemKey key;
  key.head_dim = static_cast<int>(d.head_dim), key.dtype = dtype, key.causal = d.causal;
  key.batch = d.batch, key.heads_q = key.heads_kv = d.heads, key.seqlen_q = key.seqlen_k = d.seqlen;

  fmt::print("\nflashgen demo: the generated kernels of this problem ({}, {}{})\n", to_string(dtype), to_string(arch),
             gpu ? "" : ": no GPU here, compiling for the H100/H200 target; NVRTC needs no GPU");
  KernelCache cache;
  // What the Runtime below launches: on a GPU, its selector (policy, persisted winners of
  // this device in the cache directory); without one, the heuristic table.
  DeviceProfile device;
  device.arch = arch;
  std::optional<KernelSelector> selector;
  if (gpu) {
    device = query_device_profile(0);
    selector.emplace(effective_autotune_policy(AutotunePolicy::cached), cache.dir(), default_log_sink());
  }
  auto select = [&](TunedPass pass) {
    return selector ? selector->select(key, pass, device, 0) : select_kernels(key, pass, device, nullptr);
  };
  std::vector<KernelSpec> specs = select(TunedPass::forward);
  for (const KernelSpec& s : select(TunedPass::backward)) specs.push_back(s);
  const auto start = std::chrono::steady_clock::now();
  const auto kernels = cache.get_many(specs);
  print_kernels(kernels, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  fmt::print("    cache: {}\n", cache.dir().string());
  if (!gpu) {
    fmt::print("  GPU       none on this machine: kernels compiled, not run\n");
    return 0;
  }
  return run_on_gpu(d, dtype, seed);
}

}  // namespace flashgen::cli
