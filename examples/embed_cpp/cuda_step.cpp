// One attention training step on raw CUDA buffers, as an engine holds them: bf16 q, k, v
// in device memory (GQA, causal, seqlen_q != seqlen_k), then forward, the loss
// sum(o * w) (so dO = w), backward, all enqueued on the engine's stream. The results are
// checked against flashgen's CPU backend run in fp32 on the same bf16 values.
//
// Device memory comes from the CUDA runtime (cudart). flashgen launches through the
// driver API in the device's primary context, which is the context cudart uses too.
#include "cuda_step.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 2, kSeqQ = 193, kSeqK = 301, kHeadsQ = 8, kHeadsKV = 2, kDim = 64;
constexpr std::size_t kNq = kBatch * kSeqQ * kHeadsQ * kDim, kNkv = kBatch * kSeqK * kHeadsKV * kDim;
constexpr std::size_t kNlse = kBatch * kHeadsQ * kSeqQ;
constexpr int kDevice = 0;

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}

// n elements of T in device memory, freed at the end of the scope.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : bytes_(n * sizeof(T)) {
    check_cuda(cudaMalloc(&data_, bytes_), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return data_; }
  void upload(const std::vector<T>& host, cudaStream_t stream) {
    check_cuda(cudaMemcpyAsync(data_, host.data(), bytes_, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
  }
  void download(std::vector<T>& host, cudaStream_t stream) const {
    host.resize(bytes_ / sizeof(T));
    check_cuda(cudaMemcpyAsync(host.data(), data_, bytes_, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  }
  // All bits set: NaN in bf16 and fp32, so an entry the library never writes cannot pass.
  void poison(cudaStream_t stream) { check_cuda(cudaMemsetAsync(data_, 0xFF, bytes_, stream), "cudaMemsetAsync"); }

 private:
  T* data_ = nullptr;
  std::size_t bytes_;
};

class Stream {
 public:
  Stream() { check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

std::vector<__nv_bfloat16> random_bf16(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<__nv_bfloat16> x(n);
  for (auto& e : x) e = __float2bfloat16(normal(rng));
  return x;
}

std::vector<float> to_float(const std::vector<__nv_bfloat16>& x) {
  std::vector<float> y(x.size());
  std::transform(x.begin(), x.end(), y.begin(), [](__nv_bfloat16 e) { return __bfloat162float(e); });
  return y;
}

// The same problem's tensors in one place: the GPU's bf16 buffers or the CPU's fp32 vectors.
struct Buffers {
  void *q, *k, *v, *w, *o, *lse, *dq, *dk, *dv;
};

void forward_and_backward(flashgen::Runtime& rt, const Buffers& b, flashgen::DType dtype, int device,
                          void* stream) {
  auto q_like = [&](void* p) { return flashgen::Tensor::contiguous(p, dtype, {kBatch, kSeqQ, kHeadsQ, kDim}, device); };
  auto kv_like = [&](void* p) { return flashgen::Tensor::contiguous(p, dtype, {kBatch, kSeqK, kHeadsKV, kDim}, device); };
  const auto lse = flashgen::Tensor::contiguous3(b.lse, flashgen::DType::f32, {kBatch, kHeadsQ, kSeqQ}, device);
  flashgen::AttentionOptions options;
  options.causal = true;  // bottom-right aligned: query i sees keys j <= i + (seqlen_k - seqlen_q)

  flashgen::ForwardArgs fwd;
  fwd.q = q_like(b.q);
  fwd.k = kv_like(b.k);
  fwd.v = kv_like(b.v);
  fwd.o = q_like(b.o);
  fwd.lse = lse;
  fwd.options = options;
  rt.forward(fwd, stream);

  flashgen::BackwardArgs bwd;
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.o = fwd.o;
  bwd.lse = lse;
  bwd.dout = q_like(b.w);  // d(sum(o * w))/do = w
  bwd.dq = q_like(b.dq);
  bwd.dk = kv_like(b.dk);
  bwd.dv = kv_like(b.dv);
  bwd.options = options;
  rt.backward(bwd, stream);  // workspace: stream-ordered memory on `stream`
}

double loss(const std::vector<float>& o, const std::vector<float>& w) {
  double sum = 0;
  for (std::size_t i = 0; i < o.size(); ++i) sum += double(o[i]) * w[i];
  return sum;
}

// max |got - want| relative to the largest |want| (at least 1); NaN if any entry is NaN.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double error = 0, scale = 1;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(double(got[i]) - want[i]);
    if (std::isnan(diff)) return diff;
    error = std::max(error, diff);
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return error / scale;
}

}  // namespace

bool cuda_training_step(flashgen::Runtime& rt, unsigned seed) {
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipping the GPU part\n",
                found != cudaSuccess ? cudaGetErrorString(found) : "none found");
    return true;
  }
  check_cuda(cudaSetDevice(kDevice), "cudaSetDevice");

  std::mt19937 rng(seed);
  const auto q = random_bf16(kNq, rng), k = random_bf16(kNkv, rng), v = random_bf16(kNkv, rng);
  const auto w = random_bf16(kNq, rng);

  // GPU: upload, poison the outputs, run the step on our stream, download.
  Stream stream;
  DeviceArray<__nv_bfloat16> d_q(kNq), d_k(kNkv), d_v(kNkv), d_w(kNq), d_o(kNq), d_dq(kNq), d_dk(kNkv), d_dv(kNkv);
  DeviceArray<float> d_lse(kNlse);
  d_q.upload(q, stream);
  d_k.upload(k, stream);
  d_v.upload(v, stream);
  d_w.upload(w, stream);
  for (auto* out : {&d_o, &d_dq, &d_dk, &d_dv}) out->poison(stream);
  d_lse.poison(stream);
  forward_and_backward(rt, {d_q.data(), d_k.data(), d_v.data(), d_w.data(), d_o.data(), d_lse.data(), d_dq.data(),
                            d_dk.data(), d_dv.data()},
                       flashgen::DType::bf16, kDevice, static_cast<cudaStream_t>(stream));
  std::vector<__nv_bfloat16> o, dq, dk, dv;
  std::vector<float> lse;
  d_o.download(o, stream);
  d_lse.download(lse, stream);
  d_dq.download(dq, stream);
  d_dk.download(dk, stream);
  d_dv.download(dv, stream);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // flashgen itself never synchronises

  // CPU backend on the same values in fp32: the reference.
  auto cq = to_float(q), ck = to_float(k), cv = to_float(v), cw = to_float(w);
  const float nan = std::nanf("");
  std::vector<float> co(kNq, nan), clse(kNlse, nan), cdq(kNq, nan), cdk(kNkv, nan), cdv(kNkv, nan);
  forward_and_backward(rt, {cq.data(), ck.data(), cv.data(), cw.data(), co.data(), clse.data(), cdq.data(),
                            cdk.data(), cdv.data()},
                       flashgen::DType::f32, flashgen::kCpu, nullptr);

  // bf16 keeps 8 significant bits: flashgen's bf16 CPU path is off by 2-3e-3 of the largest
  // value here, and the GPU kernels also round P and dS to bf16. 4e-2 leaves room for that;
  // real bugs (a wrong mask, a GQA head not summed) are off by order 1. lse is fp32 throughout.
  struct Check {
    const char* name;
    double error, tolerance;
  };
  const Check checks[] = {
      {"o", relative_error(to_float(o), co), 4e-2},    {"lse", relative_error(lse, clse), 1e-4},
      {"dq", relative_error(to_float(dq), cdq), 4e-2}, {"dk", relative_error(to_float(dk), cdk), 4e-2},
      {"dv", relative_error(to_float(dv), cdv), 4e-2},
  };
  std::printf("GPU step (bf16, batch %lld, seqlen_q %lld, seqlen_k %lld, heads %lld/%lld, head_dim %lld, causal): "
              "loss %.4f (CPU backend: %.4f)\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSeqQ), static_cast<long long>(kSeqK),
              static_cast<long long>(kHeadsQ), static_cast<long long>(kHeadsKV), static_cast<long long>(kDim),
              loss(to_float(o), cw), loss(co, cw));
  bool ok = true;
  for (const Check& c : checks) {
    const bool pass = c.error <= c.tolerance;  // false for NaN
    std::printf("  %-3s max |GPU - CPU| / max|CPU| = %.2e (tolerance %.0e)%s\n", c.name, c.error, c.tolerance,
                pass ? "" : "  FAILED");
    ok = ok && pass;
  }
  return ok;
}
