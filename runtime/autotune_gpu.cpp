#include "runtime/autotune_gpu.h"

#include <fmt/format.h>

#include <algorithm>
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
  Problem p;
  p.head_dim = shape.head_dim;
  p.dtype = shape.dtype;
  p.seqlen_q = shape.seqlen_q;
  p.seqlen_k = shape.seqlen_k;
  p.batch = p.heads_q = p.heads_kv = 1;
  p.options = shape.options;
  if (p.options.causal) p.options.window_right = 0;  // as validate() folds it
  const ProblemKey key = problem_key(p);
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
}

double GpuCandidateTimer::time(const TuningKey& key, const Candidate& candidate) {
  ensure_context(device_);
  if (prepared_ != key.name()) prepare(key);
  const CudaDriver& d = cuda_driver();
  auto zero = [&](Buffer b) {
    check_cuda(d.cuMemsetD32Async(ptr_[b], 0, bytes_[b] / 4, nullptr), "cuMemsetD32Async (autotune reset)");
  };
  Timing t{};
  if (key.pass == TunedPass::forward) {
    const Problem p = validate_forward(forward_);
    t = time_on_stream(
        nullptr, [&] { gpu_forward(cache_, forward_, p, nullptr, candidate); }, [&] { zero(o); }, timing_);
  } else {
    const Problem p = validate_backward(backward_);
    t = time_on_stream(
        nullptr, [&] { gpu_backward(cache_, backward_, p, nullptr, candidate); },
        [&] {
          for (Buffer b : {dq, dk, dv}) zero(b);
        },
        timing_);
  }
  return t.median_ms;
}

}  // namespace flashgen
