// The device half of autotuning: what identifies and limits a GPU, and the timer that
// runs candidates on it (random inputs of the key's tuning problem, CUDA events through
// runtime/kernel_timer.h: warm-up, median, L2 flushed and outputs reset between runs).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/tuning_candidates.h"
#include "flashgen/flashgen.hpp"
#include "runtime/autotune.h"
#include "runtime/autotune_db.h"
#include "runtime/kernel_timer.h"

namespace flashgen {

class KernelCache;

// Name, SM count, driver and NVRTC versions, opt-in shared memory and thread limits.
// Throws Error(no_device) without a driver.
DeviceProfile query_device_profile(int device);

// The tuning keys a declared shape stands for (forward and/or backward).
std::vector<TuningKey> tuning_keys(const TuneShape& shape, Arch arch);

// Tuning is quicker than benchmarking: one warm-up, the median of five runs.
constexpr TimingOptions kTuningTiming{1, 5, true};
// A candidate first runs once after its warm-up: when that run is already slower than the
// time to beat, it is a loser and its timing stops there.
constexpr TimingOptions kTuningProbe{1, 1, true};

// Times candidates on `device` (kernels through `cache`). Device buffers are sized for the
// largest tuning problem seen and reused; the current context must be the device's.
class GpuCandidateTimer {
 public:
  GpuCandidateTimer(KernelCache& cache, int device, TimingOptions timing = kTuningTiming);
  ~GpuCandidateTimer();
  GpuCandidateTimer(const GpuCandidateTimer&) = delete;
  GpuCandidateTimer& operator=(const GpuCandidateTimer&) = delete;

  // Median ms of one whole pass (forward, or backward: every kernel of the candidate);
  // the probe run's time when that is above beat_ms.
  double time(const TuningKey& key, const Candidate& candidate, double beat_ms);
  CandidateTimer timer() {
    return [this](const TuningKey& k, const Candidate& c, double beat_ms) { return time(k, c, beat_ms); };
  }

  // Runs the candidate once and compares a sample of its outputs (every 61st row of o and
  // lse, or of dq, dk and dv) with the heuristic default's: empty when they agree within
  // the rounding two kernels' summation orders may differ by, else what differs.
  std::string check(const TuningKey& key, const Candidate& candidate);
  CandidateCheck checker() {
    return [this](const TuningKey& k, const Candidate& c) { return check(k, c); };
  }

 private:
  enum Buffer { q, k, v, o, dout, dq, dk, dv, lse, workspace, kBuffers };
  // What a candidate of the pass writes: reset before each timed run, poisoned and sampled by check().
  static std::vector<Buffer> outputs(TunedPass pass);
  void prepare(const TuningKey& key);
  void reserve(Buffer b, std::size_t bytes);
  void fill_random(Buffer b, std::size_t elements, DType dtype);
  void run(const TuningKey& key, const Candidate& candidate);
  std::vector<std::vector<float>> sample_outputs(const TuningKey& key);

  KernelCache& cache_;
  int device_;
  TimingOptions timing_;
  CUdeviceptr ptr_[kBuffers] = {};
  std::size_t bytes_[kBuffers] = {};
  std::string prepared_;  // the key whose inputs (and, backward, o and lse) are on the device
  std::vector<std::vector<float>> reference_;  // the heuristic default's sampled outputs for prepared_
  ForwardArgs forward_;
  BackwardArgs backward_;
};

}  // namespace flashgen
