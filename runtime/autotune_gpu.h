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

// Times candidates on `device` (kernels through `cache`). Device buffers are sized for the
// largest tuning problem seen and reused; the current context must be the device's.
class GpuCandidateTimer {
 public:
  GpuCandidateTimer(KernelCache& cache, int device, TimingOptions timing = kTuningTiming);
  ~GpuCandidateTimer();
  GpuCandidateTimer(const GpuCandidateTimer&) = delete;
  GpuCandidateTimer& operator=(const GpuCandidateTimer&) = delete;

  // Median ms of one whole pass (forward, or backward: every kernel of the candidate).
  double time(const TuningKey& key, const Candidate& candidate);
  CandidateTimer timer() {
    return [this](const TuningKey& k, const Candidate& c) { return time(k, c); };
  }

 private:
  enum Buffer { q, k, v, o, dout, dq, dk, dv, lse, workspace, kBuffers };
  void prepare(const TuningKey& key);
  void reserve(Buffer b, std::size_t bytes);
  void fill_random(Buffer b, std::size_t elements, DType dtype);

  KernelCache& cache_;
  int device_;
  TimingOptions timing_;
  CUdeviceptr ptr_[kBuffers] = {};
  std::size_t bytes_[kBuffers] = {};
  std::string prepared_;  // the key whose inputs (and, backward, o and lse) are on the device
  ForwardArgs forward_;
  BackwardArgs backward_;
};

}  // namespace flashgen
