// Timing of work enqueued on a CUDA stream with CUDA events, the way kernel
// benchmarks are timed: warm-up runs, then the median of several timed runs, each on
// a cold L2 (a buffer larger than L2 is written first) and with the caller's reset
// (e.g. re-poisoned outputs) done outside the timed interval.
// Internal (the autotuner and `flashgen bench` use it), not public API.
#pragma once

#include <cuda.h>

#include <functional>

namespace flashgen {

struct TimingOptions {
  int warmup = 2;
  int repeats = 7;
  bool flush_l2 = true;
};

struct Timing {
  double median_ms;
  double min_ms;
  double max_ms;
};

// Times `enqueue` (which enqueues work on `stream`) with CUDA events: `warmup` untimed
// runs, then `repeats` timed runs, each preceded by `reset` (may be empty; e.g. re-poison
// outputs) and, when flush_l2, a write of a buffer larger than the device's L2 (both
// outside the timed interval). Needs a current CUDA context (ensure_context); `stream`
// belongs to it. Throws flashgen::Error: no_device without a GPU, invalid_argument for
// bad options or no current context, cuda_error/out_of_memory for CUDA failures.
Timing time_on_stream(CUstream stream, const std::function<void()>& enqueue, const std::function<void()>& reset,
                      const TimingOptions& options = {});

}  // namespace flashgen
