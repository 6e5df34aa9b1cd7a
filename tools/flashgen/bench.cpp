// `flashgen bench`: forward, backward and forward+backward of generated kernels over a
// shape grid on device 0, through the public Runtime API, timed with CUDA events
// (runtime/kernel_timer.h). Prints a table as it goes and writes JSON/CSV at the end.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_timer.h"
#include "tools/flashgen/bench_grid.h"
#include "tools/flashgen/bench_report.h"
#include "tools/flashgen/commands.h"

namespace flashgen::cli {
namespace {

constexpr int kDevice = 0;

// A device allocation freed when it goes out of scope.
class DeviceAllocation {
 public:
  explicit DeviceAllocation(std::size_t bytes) {
    check_cuda(cuda_driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc", fmt::format("{} bytes for a bench tensor", bytes));
  }
  ~DeviceAllocation() { cuda_driver().cuMemFree(ptr_); }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  CUdeviceptr ptr() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
};

// Standard-normal values rounded to the bench's dtype, drawn once; each input tensor
// copies a different window of them.
class RandomValues {
 public:
  RandomValues(DType dtype, std::size_t count, unsigned seed) : bits_(count) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    for (std::uint16_t& b : bits_)
      b = dtype == DType::bf16 ? cpu::float_to_bf16_bits(normal(rng)) : cpu::float_to_half_bits(normal(rng));
  }
  void upload(CUdeviceptr to, std::size_t count, std::size_t offset) const {
    check_cuda(cuda_driver().cuMemcpyHtoD(to, bits_.data() + offset, count * sizeof(std::uint16_t)),
               "cuMemcpyHtoD (bench inputs)");
  }

 private:
  std::vector<std::uint16_t> bits_;
};

// Offsets (in elements) of q, k, v and dO in the random values.
constexpr std::size_t kInputOffsets[] = {0, 1009, 2027, 3041};

std::size_t largest_input(const BenchPlan& plan) {
  std::size_t largest = 0;
  for (const BenchShape& s : plan.shapes) {
    const std::int64_t keys = s.page_size > 0 ? (s.seqlen + s.page_size - 1) / s.page_size * s.page_size : s.seqlen;
    const std::int64_t kv = s.batch * keys * s.heads_kv * s.head_dim;
    const std::int64_t q = s.batch * (s.decode() ? s.seqlen_q : s.seqlen) * s.heads * s.head_dim;
    largest = std::max<std::size_t>(largest, std::max(q, kv));
  }
  return largest;
}

// The tensors of one shape on the device: inputs random, outputs as the calls leave them.
class ShapeTensors {
 public:
  ShapeTensors(const BenchShape& s, DType dtype, const RandomValues& random) {
    if (s.decode()) {
      kv_cache(s, dtype, random);
      return;
    }
    const std::array<std::int64_t, 4> q_shape{s.batch, s.seqlen, s.heads, s.head_dim};
    const std::array<std::int64_t, 4> kv_shape{s.batch, s.seqlen, s.heads_kv, s.head_dim};
    const Tensor q = tensor(dtype, q_shape), k = tensor(dtype, kv_shape), v = tensor(dtype, kv_shape);
    const Tensor dout = tensor(dtype, q_shape);
    const Tensor inputs[] = {q, k, v, dout};
    for (int i = 0; i < 4; ++i)
      random.upload(reinterpret_cast<CUdeviceptr>(inputs[i].data), inputs[i].numel(), kInputOffsets[i]);

    const Tensor o = tensor(dtype, q_shape);
    const std::array<std::int64_t, 3> lse_shape{s.batch, s.heads, s.seqlen};
    allocations_.push_back(std::make_unique<DeviceAllocation>(s.batch * s.heads * s.seqlen * sizeof(float)));
    bytes_ += s.batch * s.heads * s.seqlen * sizeof(float);
    const Tensor lse =
        Tensor::contiguous3(reinterpret_cast<void*>(allocations_.back()->ptr()), DType::f32, lse_shape, kDevice);
    forward_ = ForwardArgs{q, k, v, o, lse, s.options};
    backward_.q = q, backward_.k = k, backward_.v = v, backward_.o = o, backward_.lse = lse;
    backward_.dout = dout;
    backward_.dq = tensor(dtype, q_shape);
    backward_.dk = tensor(dtype, kv_shape);
    backward_.dv = tensor(dtype, kv_shape);
    backward_.options = s.options;
    if (s.varlen) pack(s);
  }

  const ForwardArgs& forward() const { return forward_; }
  const BackwardArgs& backward() const { return backward_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Tensor tensor(DType dtype, std::array<std::int64_t, 4> shape) {
    const std::size_t bytes = shape[0] * shape[1] * shape[2] * shape[3] * size_of(dtype);
    allocations_.push_back(std::make_unique<DeviceAllocation>(bytes));
    bytes_ += bytes;
    return Tensor::contiguous(reinterpret_cast<void*>(allocations_.back()->ptr()), dtype, shape, kDevice);
  }

  // The dense batch viewed as packed sequences of s.seqlen tokens (the same bytes): rows
  // (B * N, heads, D), lse (heads, B * N) — a reshaped view of the dense one's storage —
  // and cu_seqlens 0, N, 2N, ... on the device.
  void pack(const BenchShape& s) {
    const auto rows = [&](Tensor t) {
      t.rank = 3;
      t.shape = {s.batch * s.seqlen, t.shape[2], t.shape[3], 0};
      t.stride = {t.shape[1] * t.shape[2], t.shape[2], 1, 0};
      return t;
    };
    std::vector<std::int32_t> cu(static_cast<std::size_t>(s.batch + 1));
    for (std::size_t b = 0; b < cu.size(); ++b) cu[b] = static_cast<std::int32_t>(b * s.seqlen);
    PackedSequences seqs;
    seqs.cu_seqlens_q = seqs.cu_seqlens_k = indices(cu, {s.batch + 1, 1, 1, 1}, 1);
    seqs.max_seqlen_q = seqs.max_seqlen_k = s.seqlen;
    Tensor lse = forward_.lse;
    lse.rank = 2;
    lse.shape = {s.heads, s.batch * s.seqlen, 0, 0};
    lse.stride = {s.batch * s.seqlen, 1, 0, 0};
    for (Tensor* t : {&forward_.q, &forward_.k, &forward_.v, &forward_.o}) *t = rows(*t);
    for (Tensor* t : {&backward_.q, &backward_.k, &backward_.v, &backward_.o, &backward_.dout, &backward_.dq,
                      &backward_.dk, &backward_.dv})
      *t = rows(*t);
    forward_.lse = backward_.lse = lse;
    forward_.varlen = backward_.varlen = seqs;
  }

  // A decode row: q (batch, seqlen_q, heads, D) against a cache of s.seqlen keys per sequence,
  // contiguous or in pages of s.page_size rows named by a shuffled block table; seqused_k
  // gives every sequence all its keys (the engine's form: lengths read on the device).
  void kv_cache(const BenchShape& s, DType dtype, const RandomValues& random) {
    const std::array<std::int64_t, 4> q_shape{s.batch, s.seqlen_q, s.heads, s.head_dim};
    const std::int64_t pages_per_seq = s.page_size > 0 ? (s.seqlen + s.page_size - 1) / s.page_size : 0;
    const std::array<std::int64_t, 4> kv_shape =
        s.page_size > 0 ? std::array<std::int64_t, 4>{s.batch * pages_per_seq, s.page_size, s.heads_kv, s.head_dim}
                        : std::array<std::int64_t, 4>{s.batch, s.seqlen, s.heads_kv, s.head_dim};
    ForwardArgs& f = forward_;
    f.q = tensor(dtype, q_shape);
    f.k = tensor(dtype, kv_shape);
    f.v = tensor(dtype, kv_shape);
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = i == 0 ? f.q : i == 1 ? f.k : f.v;
      random.upload(reinterpret_cast<CUdeviceptr>(t.data), t.numel(), kInputOffsets[i]);
    }
    f.o = tensor(dtype, q_shape);
    f.lse = tensor(DType::f32, {s.batch, s.heads, s.seqlen_q, 1});
    f.lse.rank = 3;
    f.options = s.options;
    f.seqused_k = indices(std::vector<std::int32_t>(static_cast<std::size_t>(s.batch), static_cast<std::int32_t>(s.seqlen)),
                       {s.batch, 1, 1, 1}, 1);
    if (s.page_size > 0) {
      std::vector<std::int32_t> table(static_cast<std::size_t>(s.batch * pages_per_seq));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(12345));
      f.block_table = indices(table, {s.batch, pages_per_seq, 1, 1}, 2);
    }
  }

  // An int32 tensor of `rank` on the device holding `values` (cu_seqlens, seqused_k, a block table).
  Tensor indices(const std::vector<std::int32_t>& values, std::array<std::int64_t, 4> shape, int rank) {
    Tensor t = tensor(DType::i32, shape);
    t.rank = rank;
    check_cuda(cuda_driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(t.data), values.data(),
                                          values.size() * sizeof(std::int32_t)),
               "cuMemcpyHtoD (bench indices)");
    return t;
  }

  std::vector<std::unique_ptr<DeviceAllocation>> allocations_;
  std::size_t bytes_ = 0;
  ForwardArgs forward_;
  BackwardArgs backward_;
};

// The high watermark of the device's stream-ordered memory pool, where the runtime
// allocates its backward workspace: reset before a pass, read after it.
class PoolWatermark {
 public:
  PoolWatermark() {
    CUdevice device = 0;
    check_cuda(cuda_driver().cuDeviceGet(&device, kDevice), "cuDeviceGet");
    check_cuda(cuda_driver().cuDeviceGetMemPool(&pool_, device), "cuDeviceGetMemPool");
  }
  void reset() const {
    cuuint64_t zero = 0;
    check_cuda(cuda_driver().cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero),
               "cuMemPoolSetAttribute(USED_MEM_HIGH)");
  }
  std::uint64_t bytes() const {
    cuuint64_t high = 0;
    check_cuda(cuda_driver().cuMemPoolGetAttribute(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &high),
               "cuMemPoolGetAttribute(USED_MEM_HIGH)");
    return high;
  }

 private:
  CUmemoryPool pool_ = nullptr;
};

// A cheap guard against timing a broken kernel: the first values of an output are finite.
void expect_finite(const Tensor& t, const char* name) {
  std::vector<std::uint16_t> bits(std::min<std::int64_t>(t.numel(), 4096));
  check_cuda(cuda_driver().cuMemcpyDtoH(bits.data(), reinterpret_cast<CUdeviceptr>(t.data), bits.size() * 2),
             "cuMemcpyDtoH (output check)");
  for (std::size_t i = 0; i < bits.size(); ++i)
    if (!std::isfinite(cpu::load_float(bits.data(), t.dtype, static_cast<std::int64_t>(i))))
      throw Error(Status::internal, fmt::format("{}[{}] is not finite after the timed runs", name, i));
}

BenchResult measure(Runtime& runtime, const ShapeTensors& t, const BenchShape& shape, BenchPass pass,
                    const TimingOptions& timing, const PoolWatermark& pool) {
  BenchResult r;
  r.shape = shape;
  r.pass = pass;
  r.io_bytes = t.bytes();
  try {
    // A decode row has no backward.
    r.workspace_bytes = shape.decode() ? 0 : runtime.backward_workspace_bytes(t.backward());
    // backward reads o and lse: one forward first.
    if (pass == BenchPass::backward) runtime.forward(t.forward());
    check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
    pool.reset();
    const auto enqueue = [&] {
      if (pass != BenchPass::backward) runtime.forward(t.forward());
      if (pass != BenchPass::forward) runtime.backward(t.backward());
    };
    r.timing = time_on_stream(nullptr, enqueue, {}, timing);
    r.peak_extra_bytes = pool.bytes();
    if (pass != BenchPass::backward) expect_finite(t.forward().o, "o");
    if (pass != BenchPass::forward) expect_finite(t.backward().dq, "dq");
    r.tflops = pass_flops(shape, pass) / (r.timing->median_ms * 1e-3) / 1e12;
  } catch (const Error& e) {
    if (e.status() == Status::no_device) throw;
    r.timing.reset();
    r.error = fmt::format("{}: {}", to_string(e.status()), e.what());
  }
  return r;
}

std::string device_description() {
  const CudaDriver& d = cuda_driver();
  CUdevice device = 0;
  check_cuda(d.cuDeviceGet(&device, kDevice), "cuDeviceGet");
  char name[256] = {};
  check_cuda(d.cuDeviceGetName(name, sizeof(name), device), "cuDeviceGetName");
  int sms = 0;
  check_cuda(d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device), "cuDeviceGetAttribute");
  return fmt::format("{} ({} SMs, device {})", name, sms, kDevice);
}

std::ofstream open_output(const std::string& path, const char* flag) {
  std::ofstream out;
  if (path.empty()) return out;
  out.open(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Status::invalid_argument, fmt::format("{}: cannot write '{}', expected a writable file path", flag, path));
  return out;
}

void run_bench(const BenchOptions& options) {
  const BenchPlan plan = make_bench_plan(options);  // flag errors before any GPU work
  std::ofstream json = open_output(options.json_path, "--json");
  std::ofstream csv = open_output(options.csv_path, "--csv");
  try {
    ensure_context(kDevice);
  } catch (const Error& e) {
    if (e.status() != Status::no_device) throw;
    throw Error(Status::no_device, fmt::format("flashgen bench needs a CUDA GPU (device {}): {}", kDevice, e.what()));
  }

  BenchSetup setup;
  setup.device = device_description();
  setup.dtype = plan.dtype;
  setup.timing = TimingOptions{.warmup = options.warmup, .repeats = options.repeats, .flush_l2 = true};
  const RandomValues random(plan.dtype, largest_input(plan) + kInputOffsets[3], std::random_device{}());
  const PoolWatermark pool;
  Runtime runtime;

  print_header(std::cout, setup);
  std::vector<BenchResult> results;
  for (const BenchShape& shape : plan.shapes) {
    std::unique_ptr<ShapeTensors> tensors;
    std::string failure;
    try {
      tensors = std::make_unique<ShapeTensors>(shape, plan.dtype, random);
    } catch (const Error& e) {
      if (e.status() == Status::no_device) throw;
      failure = fmt::format("{}: {}", to_string(e.status()), e.what());
    }
    for (BenchPass pass : plan.passes) {
      BenchResult r;
      if (tensors) {
        r = measure(runtime, *tensors, shape, pass, setup.timing, pool);
      } else {
        r.shape = shape, r.pass = pass, r.error = failure;
      }
      print_row(std::cout, r);
      results.push_back(r);
    }
  }

  if (json) json << bench_json(setup, results);
  if (csv) csv << bench_csv(setup, results);
  const auto failed = std::count_if(results.begin(), results.end(), [](const BenchResult& r) { return !r.timing; });
  if (failed > 0)
    throw Error(Status::internal, fmt::format("flashgen bench: {} of {} measurements failed (see the table{})", failed,
                                              results.size(), options.json_path.empty() ? "" : " and the JSON"));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "time forward, backward and forward+backward over a shape grid (GPU)");
  cmd->add_option("--head-dims", o->head_dims, "head dimensions (comma-separated)")->delimiter(',')->capture_default_str();
  cmd->add_option("--seqlens", o->seqlens, "sequence lengths, e.g. 1k,2k,16384 (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "batch size (default: 16384 / N)");
  cmd->add_option("--heads", o->heads, "query heads (default: 2048 / D)");
  cmd->add_option("--heads-kv", o->heads_kv, "key/value heads (default: like --heads)");
  cmd->add_option("--causal", o->causal, "on, off or both")->check(CLI::IsMember({"on", "off", "both"}))->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "bf16 or fp16")->check(CLI::IsMember({"bf16", "fp16"}))->capture_default_str();
  cmd->add_option("--window", o->window, "sliding window L,R (-1: unbounded side)")->delimiter(',')->expected(2);
  cmd->add_option("--softcap", o->softcap, "soft-capping of the logits, value > 0 (0: off)");
  cmd->add_flag("--deterministic", o->deterministic, "deterministic backward (no atomics)");
  cmd->add_option("--layouts", o->layouts, "dense, varlen (the batch as packed sequences; comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"dense", "varlen"}))
      ->capture_default_str();
  cmd->add_flag("--decode", o->decode,
                "decode rows instead of the grid: issue 15's shapes over a KV cache (forward; K/V TB/s reported)");
  cmd->add_option("--page-sizes", o->page_sizes, "with --decode: KV-cache page sizes, 0 for contiguous (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--passes", o->passes, "fwd, bwd, fwdbwd (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fwd", "bwd", "fwdbwd"}))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed runs before timing")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "timed runs (the median is reported)")->capture_default_str();
  cmd->add_option("--json", o->json_path, "write the results as JSON to this file");
  cmd->add_option("--csv", o->csv_path, "write the results as CSV to this file");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace flashgen::cli
