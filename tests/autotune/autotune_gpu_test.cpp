// Autotuning end to end on the GPU: Runtime::tune tunes one small set (d64 bf16 causal,
// the 256 bucket), persists it, reuses it; a persisted non-default winner is what
// forward and backward launch (its kernels are the ones compiled into a fresh cache);
// and the results still meet FlashAttention's rule against the fp64 CPU oracle.
// Skips where there is no GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "attention_rule.h"
#include "device_buffer.h"
#include "input_precision_reference.h"
#include "runtime/autotune_db.h"
#include "runtime/autotune_gpu.h"
#include "runtime/cache_directory.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_cache.h"
#include "runtime/validate.h"
#include "tests/cache/cache_test_support.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using testing_support::ScopedEnv;
using testing_support::ScratchDir;

constexpr int kBatch = 2, kHeads = 3, kHeadDim = 64, kSeqQ = 277, kSeqK = 300;

TuneShape small_shape() {
  TuneShape s;
  s.head_dim = kHeadDim;
  s.dtype = DType::bf16;
  s.seqlen_q = kSeqQ;
  s.seqlen_k = kSeqK;
  s.options.causal = true;
  return s;
}

class AutotuneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
  }
  ScopedEnv no_policy_{"FLASHGEN_AUTOTUNE", std::nullopt};
  ScopedEnv disk_{"FLASHGEN_DISABLE_DISK_CACHE", std::nullopt};
};

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = round_to(DType::bf16, dist(rng));
  return out;
}

struct DeviceTensor {
  DeviceBuffer buffer;
  std::array<std::int64_t, 4> shape;
  explicit DeviceTensor(std::array<std::int64_t, 4> s) : buffer(s[0] * s[1] * s[2] * s[3] * 2), shape(s) { buffer.fill_nan(); }
  Tensor tensor() const { return Tensor::contiguous(buffer.data(), DType::bf16, shape, 0); }
  void upload(const std::vector<float>& v) {
    std::vector<std::uint16_t> bits(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) bits[i] = cpu::float_to_bf16_bits(v[i]);
    buffer.upload(bits.data(), bits.size() * 2);
  }
  std::vector<float> download() const {
    std::vector<std::uint16_t> bits(buffer.bytes() / 2);
    buffer.download(bits.data(), buffer.bytes());
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = cpu::bf16_bits_to_float(bits[i]);
    return out;
  }
};

std::vector<double> f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Forward and backward of the small shape through `rt`, judged by the rule.
void expect_correct(Runtime& rt) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const std::array<std::int64_t, 4> qs = {kBatch, kSeqQ, kHeads, kHeadDim}, ks = {kBatch, kSeqK, kHeads, kHeadDim};
  const std::vector<float> q = random_values(rng, kBatch * kSeqQ * kHeads * kHeadDim),
                           k = random_values(rng, kBatch * kSeqK * kHeads * kHeadDim),
                           v = random_values(rng, kBatch * kSeqK * kHeads * kHeadDim),
                           dout = random_values(rng, kBatch * kSeqQ * kHeads * kHeadDim);
  DeviceTensor dq_(qs), dk_(ks), dv_(ks), do_(qs), o_(qs), q_(qs), k_(ks), v_(ks);
  q_.upload(q);
  k_.upload(k);
  v_.upload(v);
  do_.upload(dout);
  DeviceBuffer lse(kBatch * kHeads * kSeqQ * 4);
  lse.fill_nan();

  BackwardArgs b;
  b.q = q_.tensor();
  b.k = k_.tensor();
  b.v = v_.tensor();
  b.o = o_.tensor();
  b.lse = Tensor::contiguous3(lse.data(), DType::f32, {kBatch, kHeads, kSeqQ}, 0);
  b.dout = do_.tensor();
  b.dq = dq_.tensor();
  b.dk = dk_.tensor();
  b.dv = dv_.tensor();
  b.options.causal = true;
  const ForwardArgs f{b.q, b.k, b.v, b.o, b.lse, b.options};
  rt.forward(f);
  rt.backward(b);
  check_cuda(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize (test)");

  const Problem p = validate_backward(b);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const cpu::Fp64Outputs ref = cpu::standard_forward_f64(p, f64(q), f64(k), f64(v), threads);
  const cpu::Fp64Gradients grad = cpu::standard_backward_f64(p, f64(q), f64(k), f64(v), f64(dout), threads);
  const PtResult pt = input_precision_attention(p, q, k, v, dout, threads);
  std::vector<float> lse_host(kBatch * kHeads * kSeqQ);
  lse.download(lse_host.data(), lse_host.size() * 4);
  expect_rule("o", o_.download(), ref.o, pt.o, DType::bf16, 2.0);
  expect_lse(lse_host, ref.lse);
  expect_rule("dq", dq_.download(), grad.dq, pt.dq, DType::bf16, 2.0);
  expect_rule("dk", dk_.download(), grad.dk, pt.dk, DType::bf16, 2.0);
  expect_rule("dv", dv_.download(), grad.dv, pt.dv, DType::bf16, 2.0);
}

bool has_entry_for(const std::filesystem::path& dir, const KernelSpec& s) {
  for (const EntryInfo& e : CacheDirectory(dir).list())
    if (e.name.rfind(s.uri() + "-", 0) == 0) return true;
  return false;
}

TEST_F(AutotuneGpu, TunesASmallSetPersistsItAndReusesIt) {
  ScratchDir dir;
  RuntimeOptions o;
  o.cache_dir = dir.path().string();
  Runtime rt(o);
  const std::vector<TuneOutcome> tuned = rt.tune({small_shape()});
  ASSERT_EQ(tuned.size(), 2u);  // forward and backward
  for (const TuneOutcome& t : tuned) {
    SCOPED_TRACE(t.key);
    EXPECT_FALSE(t.cached);
    EXPECT_GE(t.candidates, 2);
    EXPECT_LT(t.failed, t.candidates);
    EXPECT_TRUE(std::isfinite(t.winner_ms));
    EXPECT_GT(t.winner_ms, 0.0);
    if (std::isfinite(t.heuristic_ms)) {
      EXPECT_LE(t.winner_ms, t.heuristic_ms);
    }
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "autotune.json"));
  for (const TuneOutcome& t : rt.tune({small_shape()})) EXPECT_TRUE(t.cached) << t.key;
  expect_correct(rt);  // the tuned winners, whatever they are

  // startup with everything persisted: nothing is retuned (the constructor would take seconds otherwise).
  RuntimeOptions startup = o;
  startup.autotune = AutotunePolicy::startup;
  startup.tune_shapes = {small_shape()};
  Runtime warm(startup);
  for (const TuneOutcome& t : warm.tune({small_shape()})) EXPECT_TRUE(t.cached) << t.key;
}

// Every candidate of the small set computes what the default computes (the check passes),
// and a kernel that computes something else (causal mask dropped) is caught.
TEST_F(AutotuneGpu, TheCheckPassesEveryCandidateAndCatchesAWrongKernel) {
  ScratchDir dir;
  KernelCacheOptions cache_options;
  cache_options.dir = dir.path() / "kernels";
  KernelCache cache(std::move(cache_options));
  const DeviceProfile device = query_device_profile(0);
  GpuCandidateTimer timer(cache, 0);
  for (const TuningKey& k : tuning_keys(small_shape(), device.arch)) {
    SCOPED_TRACE(k.name());
    const CandidateSet set = tuning_candidates(k, device.limits);
    for (const Candidate& c : set.candidates) EXPECT_EQ(timer.check(k, c), "") << candidate_name(c);
    Candidate wrong = set.candidates.front();
    for (KernelSpec& s : wrong) s.causal = false;
    EXPECT_THAT(timer.check(k, wrong), ::testing::HasSubstr("where the default gives"));
    // Racing: a time to beat below anything gives the one probe run's time back.
    EXPECT_GT(timer.time(k, set.candidates.front(), 1e-9), 0.0);
  }
}

TEST_F(AutotuneGpu, APersistedWinnerIsWhatForwardAndBackwardLaunch) {
  ScratchDir dir;
  const DeviceProfile device = query_device_profile(0);
  std::vector<std::pair<TuningKey, TunedEntry>> forced;
  for (const TuningKey& k : tuning_keys(small_shape(), device.arch)) {
    const CandidateSet set = tuning_candidates(k, device.limits);
    ASSERT_GE(set.candidates.size(), 2u) << k.name();
    TunedEntry e;
    e.candidate_set = set.hash;
    e.kernels = set.candidates.back();  // not the default
    e.median_ms = e.heuristic_ms = 1.0;
    forced.push_back({k, e});
  }
  TuningDb(dir.path(), nullptr).store(device, forced);

  RuntimeOptions o;
  o.cache_dir = dir.path().string();
  Runtime rt(o);
  expect_correct(rt);
  for (const auto& [k, e] : forced) {
    for (const KernelSpec& s : e.kernels) EXPECT_TRUE(has_entry_for(dir.path(), s)) << s.uri() << " was not used";
    const KernelSpec varied = e.kernels[k.pass == TunedPass::forward ? 0 : 1];
    const KernelSpec heuristic = heuristic_candidate(k)[k.pass == TunedPass::forward ? 0 : 1];
    ASSERT_NE(varied, heuristic);
    EXPECT_FALSE(has_entry_for(dir.path(), heuristic)) << heuristic.uri() << " ran although a winner is persisted";
  }

  // Policy off ignores the winner: the heuristic kernels run.
  o.autotune = AutotunePolicy::off;
  Runtime off(o);
  expect_correct(off);
  for (const auto& [k, e] : forced)
    EXPECT_TRUE(has_entry_for(dir.path(), heuristic_candidate(k)[k.pass == TunedPass::forward ? 0 : 1]));
}

}  // namespace
}  // namespace flashgen::test
