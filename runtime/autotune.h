// The autotuner: compiles the candidate sets of all keys on a thread pool (through the
// kernel cache, so candidates land in the disk cache too) while it times the candidates
// whose kernels are ready, key after key; a candidate clearly slower than the best so far
// is dropped after one run (racing). The fastest candidate whose outputs match the
// heuristic default's is persisted in the tuning file (runtime/autotune_db.h). A candidate
// that fails to compile or run counts as infinitely slow, is logged, and tuning goes on.
//
// Timing is a parameter (CandidateTimer) so that tests drive the tuner without a GPU;
// runtime/autotune_gpu.h times candidates on the device.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/tuning_candidates.h"
#include "flashgen/flashgen.hpp"
#include "runtime/autotune_db.h"

namespace flashgen {

class KernelCache;

// FLASHGEN_AUTOTUNE when set (it wins, like every FLASHGEN_ variable), else `option`.
// Throws Error(invalid_argument) naming the variable and the allowed values for a bad value.
AutotunePolicy effective_autotune_policy(AutotunePolicy option);
const char* to_string(AutotunePolicy policy);

// The median time of one candidate for `key`, in ms. Throws when it cannot run.
// `beat_ms`: the time a candidate must beat to matter (infinity for the first one). A
// timer may stop early and return a rough time above it once the candidate is clearly
// slower: losers are the most of a set, and most of the tuning time.
using CandidateTimer = std::function<double(const TuningKey& key, const Candidate& candidate, double beat_ms)>;

// Empty when the candidate's outputs agree with the heuristic default's on the key's
// tuning problem, else what differs. A candidate must pass it before it may win.
using CandidateCheck = std::function<std::string(const TuningKey& key, const Candidate& candidate)>;

struct TuneProgress {
  enum class Phase { compiling, timing, done };
  // compiling: the tuner waits for kernels; timing: it times candidates while the
  // kernels of later keys keep compiling.
  Phase phase = Phase::compiling;
  int compiled = 0, to_compile = 0;  // distinct kernels
  int timed = 0, to_time = 0;        // candidates
  double elapsed_s = 0;
  double eta_s = -1;  // estimate of the seconds left; negative while unknown
  std::string current;  // the key being timed
};
using TuneProgressSink = std::function<void(const TuneProgress&)>;

struct TunerOptions {
  KernelCache* cache = nullptr;  // compiles the candidates ahead of timing; null: the timer compiles (tests)
  CandidateTimer timer;          // required
  CandidateCheck check;          // optional: no check when empty
  DeviceProfile device;          // whose winners are read and written; its limits prune the sets
  LogSink log;                   // failures (warning), one line per key (info)
  TuneProgressSink progress;     // optional
  int compile_threads = 0;       // 0: hardware concurrency less the timing thread's core
  // A candidate replaces the heuristic default only when it is faster by more than this
  // fraction: a tie within timing noise keeps the default.
  double min_gain = 0.01;
  // The timer may give up on a candidate slower than the best so far by this fraction.
  double race_margin = 0.15;
  // Each key's candidates are timed this many times in turn (A B C, A B C, ...) and each one
  // keeps its median: a GPU that warms (and clocks down) as it runs then favours no position
  // in the set. A candidate that fails or is given up on is not timed again.
  int rounds = 1;
};

struct TuneResult {
  TuningKey key;
  Candidate winner;
  Candidate heuristic;
  double winner_ms = 0;     // infinity when every candidate failed
  double heuristic_ms = 0;  // infinity when the default failed (or was not timed: cached)
  int candidates = 0;
  int failed = 0;
  bool cached = false;  // persisted winner of the same set reused, nothing timed
  // Every candidate timed, in the set's order, with its median (infinity: failed, or given up
  // on past the race margin). Empty when cached.
  std::vector<std::pair<Candidate, double>> timings;
};

// Tunes `keys` (duplicates are tuned once). retune false: keys whose winner is persisted
// for this device and candidate set are returned as cached without timing. The new
// winners are stored in `db` in one merge-write at the end.
std::vector<TuneResult> autotune(TuningDb& db, std::span<const TuningKey> keys, bool retune,
                                 const TunerOptions& options);

// The public summary of a result (flashgen.hpp).
TuneOutcome to_outcome(const TuneResult& r);

}  // namespace flashgen
