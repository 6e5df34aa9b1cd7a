#include "runtime/autotune_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/cpu/dtype_convert.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_attention.h"
#include "runtime/launch_plan.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/validate.h"

namespace flashgen {

namespace {

int attribute(CUdevice dev, CUdevice_attribute a, const char* what) {
  int value = 0;
  check_cuda(cuda_driver().cuDeviceGetAttribute(&value, a, dev), "cuDeviceGetAttribute", what);
  return value;
}

// Random inputs are uploaded from one block of normal(0, 1) values repeated: the values
// are what matters to the kernels' speed (no zeros, no denormals), not their order.
constexpr std::size_t kRandomBlock = std::size_t{1} << 20;

std::vector<std::uint16_t> random_block(DType dtype) {
  std::mt19937 rng(20261129);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> out(kRandomBlock);
  for (auto& x : out) x = dtype == DType::bf16 ? cpu::float_to_bf16_bits(normal(rng)) : cpu::float_to_half_bits(normal(rng));
  return out;
}

// What the kernels of `key` see at launch: causal, a window of an eighth of the sequence
// when the key has one, a cap of 30 when it soft-caps.
AttentionOptions tuning_options(const TuningKey& key) {
  AttentionOptions o;
  o.causal = key.causal;
  if (key.window) {
    o.window_left = static_cast<int>(std::max(64LL, key.seqlen_bucket / 8));
    o.window_right = key.causal ? 0 : o.window_left;
  }
  if (key.softcap) o.softcap = 30.0f;
  o.deterministic = key.deterministic;
  return o;
}

}  // namespace

DeviceProfile query_device_profile(int device) {
  const CudaDriver& d = cuda_driver();
  CUdevice dev = 0;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", fmt::format("device {}", device));
  char name[256] = {};
  check_cuda(d.cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  DeviceProfile p;
  p.identity.gpu_name = name;
  p.identity.sm_count = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT");
  check_cuda(d.cuDriverGetVersion(&p.identity.driver_version), "cuDriverGetVersion");
  p.identity.nvrtc_version = nvrtc_version();
  p.limits.max_shared_memory =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  p.limits.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK");
  p.arch = device_arch(device);
  return p;
}

std::vector<TuningKey> tuning_keys(const TuneShape& shape, Arch arch) {
  const ProblemKey key = problem_key(shape);
  std::vector<TuningKey> out;
  if (shape.forward) out.push_back(tuning_key(key, TunedPass::forward, arch));
  if (shape.backward) out.push_back(tuning_key(key, TunedPass::backward, arch));
  return out;
}

GpuCandidateTimer::GpuCandidateTimer(KernelCache& cache, int device, TimingOptions timing)
    : cache_(cache), device_(device), timing_(timing) {}

GpuCandidateTimer::~GpuCandidateTimer() {
  try {
    ensure_context(device_);
    for (CUdeviceptr p : ptr_)
      if (p) cuda_driver().cuMemFree(p);
  } catch (const Error&) {
    // No driver left at teardown: nothing to free.
  }
}

void GpuCandidateTimer::reserve(Buffer b, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 16);
  if (bytes_[b] >= bytes) return;
  const CudaDriver& d = cuda_driver();
  if (ptr_[b]) d.cuMemFree(ptr_[b]);
  ptr_[b] = 0;
  bytes_[b] = 0;
  check_cuda(d.cuMemAlloc(&ptr_[b], bytes), "cuMemAlloc (autotune buffer)", fmt::format("{} bytes", bytes));
  bytes_[b] = bytes;
}

void GpuCandidateTimer::fill_random(Buffer b, std::size_t elements, DType dtype) {
  const std::vector<std::uint16_t> block = random_block(dtype);
  for (std::size_t done = 0; done < elements;) {
    const std::size_t n = std::min(kRandomBlock, elements - done);
    check_cuda(cuda_driver().cuMemcpyHtoD(ptr_[b] + done * 2, block.data(), n * 2), "cuMemcpyHtoD (autotune inputs)");
    done += n;
  }
}

void GpuCandidateTimer::prepare(const TuningKey& key) {
  prepared_.clear();
  const ProblemKey pk = tuning_problem(key);
  const std::array<std::int64_t, 4> shape = {pk.batch, pk.seqlen_q, pk.heads_q, pk.head_dim};
  const std::size_t elements = static_cast<std::size_t>(pk.batch * pk.seqlen_q * pk.heads_q * pk.head_dim);
  for (Buffer b : {q, k, v, o, dout, dq, dk, dv}) reserve(b, elements * 2);
  reserve(lse, static_cast<std::size_t>(pk.batch * pk.heads_q * pk.seqlen_q) * 4);
  auto tensor = [&](Buffer b) { return Tensor::contiguous(reinterpret_cast<void*>(ptr_[b]), key.dtype, shape, device_); };

  forward_ = ForwardArgs{};
  forward_.q = tensor(q);
  forward_.k = tensor(k);
  forward_.v = tensor(v);
  forward_.o = tensor(o);
  forward_.lse = Tensor::contiguous3(reinterpret_cast<void*>(ptr_[lse]), DType::f32,
                                     {pk.batch, pk.heads_q, pk.seqlen_q}, device_);
  forward_.options = tuning_options(key);
  const Problem fp = validate_forward(forward_);

  reserve(workspace, backward_workspace_bytes(fp));
  backward_ = BackwardArgs{};
  backward_.q = forward_.q;
  backward_.k = forward_.k;
  backward_.v = forward_.v;
  backward_.o = forward_.o;
  backward_.lse = forward_.lse;
  backward_.dout = tensor(dout);
  backward_.dq = tensor(dq);
  backward_.dk = tensor(dk);
  backward_.dv = tensor(dv);
  backward_.options = forward_.options;
  backward_.workspace = reinterpret_cast<void*>(ptr_[workspace]);
  backward_.workspace_bytes = bytes_[workspace];

  for (Buffer b : {q, k, v, dout}) fill_random(b, elements, key.dtype);
  if (key.pass == TunedPass::backward) {
    // The backward reads o and lse: the heuristic forward writes them once per key.
    gpu_forward(cache_, forward_, fp, nullptr, select_forward_kernels(problem_key(fp), key.arch));
    check_cuda(cuda_driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize (autotune forward)");
  }
  prepared_ = key.name();
  reference_.clear();
}

std::vector<GpuCandidateTimer::Buffer> GpuCandidateTimer::outputs(TunedPass pass) {
  return pass == TunedPass::forward ? std::vector<Buffer>{o, lse} : std::vector<Buffer>{dq, dk, dv};
}

void GpuCandidateTimer::run(const TuningKey& key, const Candidate& candidate) {
  if (key.pass == TunedPass::forward)
    gpu_forward(cache_, forward_, validate_forward(forward_), nullptr, candidate);
  else
    gpu_backward(cache_, backward_, validate_backward(backward_), nullptr, candidate);
}

double GpuCandidateTimer::time(const TuningKey& key, const Candidate& candidate, double beat_ms) {
  ensure_context(device_);
  if (prepared_ != key.name()) prepare(key);
  const CudaDriver& d = cuda_driver();
  auto reset = [&] {
    for (Buffer b : outputs(key.pass))
      check_cuda(d.cuMemsetD32Async(ptr_[b], 0, bytes_[b] / 4, nullptr), "cuMemsetD32Async (autotune reset)");
  };
  auto enqueue = [&] { run(key, candidate); };
  const Timing probe = time_on_stream(nullptr, enqueue, reset, kTuningProbe);
  if (probe.min_ms > beat_ms) return probe.median_ms;
  TimingOptions rest = timing_;
  rest.warmup = 0;  // warm from the probe
  return time_on_stream(nullptr, enqueue, reset, rest).median_ms;
}

// Every 61st row of each output of the pass in outputs() order (a prime stride: the rows fall
// at every position within a tile), lse whole, as floats.
std::vector<std::vector<float>> GpuCandidateTimer::sample_outputs(const TuningKey& key) {
  const CudaDriver& d = cuda_driver();
  check_cuda(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize (autotune check)");
  const ProblemKey pk = tuning_problem(key);
  const std::size_t row_elements = static_cast<std::size_t>(pk.heads_q * pk.head_dim);
  const std::size_t rows = static_cast<std::size_t>(pk.batch * pk.seqlen_q);
  constexpr std::size_t kStride = 61;
  std::vector<std::vector<float>> out;
  auto sampled = [&](Buffer b) {
    std::vector<std::uint16_t> bits(row_elements * ((rows + kStride - 1) / kStride));
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = ptr_[b];
    copy.srcPitch = kStride * row_elements * 2;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = bits.data();
    copy.dstPitch = row_elements * 2;
    copy.WidthInBytes = row_elements * 2;
    copy.Height = (rows + kStride - 1) / kStride;
    check_cuda(d.cuMemcpy2D(&copy), "cuMemcpy2D (autotune check)");
    std::vector<float> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i)
      values[i] = key.dtype == DType::bf16 ? cpu::bf16_bits_to_float(bits[i]) : cpu::half_bits_to_float(bits[i]);
    out.push_back(std::move(values));
  };
  for (Buffer b : outputs(key.pass)) {
    if (b != lse) {
      sampled(b);
      continue;
    }
    std::vector<float> lse_values(static_cast<std::size_t>(pk.batch * pk.heads_q * pk.seqlen_q));
    check_cuda(d.cuMemcpyDtoH(lse_values.data(), ptr_[lse], lse_values.size() * 4), "cuMemcpyDtoH (autotune check)");
    out.push_back(std::move(lse_values));
  }
  return out;
}

std::string GpuCandidateTimer::check(const TuningKey& key, const Candidate& candidate) {
  ensure_context(device_);
  if (prepared_ != key.name()) prepare(key);
  const CudaDriver& d = cuda_driver();
  // Outputs poisoned with NaN (all bits set) first: a row the candidate does not write shows.
  auto poisoned_run = [&](const Candidate& c) {
    for (Buffer b : outputs(key.pass))
      check_cuda(d.cuMemsetD32Async(ptr_[b], 0xffffffffu, bytes_[b] / 4, nullptr), "cuMemsetD32Async (autotune check)");
    run(key, c);
    return sample_outputs(key);
  };
  if (reference_.empty()) reference_ = poisoned_run(heuristic_candidate(key));
  const std::vector<std::vector<float>> got = poisoned_run(candidate);
  const std::vector<Buffer> written = outputs(key.pass);
  for (std::size_t t = 0; t < got.size(); ++t) {
    static constexpr const char* kNames[kBuffers] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv", "lse", "workspace"};
    const char* name = kNames[written[t]];
    const std::vector<float>& ref = reference_[t];
    float scale = 0;
    for (float x : ref)
      if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
    // Kernels with other tiles sum in another order: their outputs differ by a few units
    // in the last place of the dtype; a wrong tile is off by the values' own size.
    const float tolerance = 0x1p-6f * scale + 1e-6f;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const bool both_same_inf = std::isinf(ref[i]) && ref[i] == got[t][i];
      if (!both_same_inf && !(std::abs(got[t][i] - ref[i]) <= tolerance))
        return fmt::format("{} sample {}: {} where the default gives {} (tolerance {:.3g})", name, i, got[t][i],
                           ref[i], tolerance);
    }
  }
  return {};
}

}  // namespace flashgen
