#include "runtime/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "runtime/environment.h"
#include "runtime/kernel_cache.h"
#include "runtime/work_queue.h"

namespace flashgen {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The median of a candidate's round times (the upper one of an even count).
double median(std::vector<double> v) {
  if (v.empty()) return kInf;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The first line of an error: NVRTC errors carry the whole compile log.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

struct Work {
  size_t index;  // position in the results
  CandidateSet set;
  std::vector<double> times;      // per candidate; +inf: failed
};

// Compiles every distinct kernel of the sets on a pool, in key order, while the tuner
// times the candidates whose kernels are ready: the GPU times one key while the CPUs
// compile the next ones. The tuner thread keeps a core for itself (kernel launches).
class CompileQueue {
 public:
  CompileQueue(const std::vector<Work>& work, const TunerOptions& o) : o_(o) {
    std::vector<KernelSpec> specs;
    for (const Work& w : work)
      for (const Candidate& c : w.set.candidates)
        for (const KernelSpec& s : c)
          if (!futures_.contains(s.hash())) {
            futures_.emplace(s.hash(), std::shared_future<void>{});
            specs.push_back(s);
          }
    const size_t cores = std::max(2u, std::thread::hardware_concurrency()) - 1;
    const size_t threads = o.compile_threads > 0 ? static_cast<size_t>(o.compile_threads) : cores;
    pool_.emplace(std::max<size_t>(1, std::min(threads, specs.size())));
    for (const KernelSpec& s : specs)
      futures_[s.hash()] = pool_->submit([this, s] {
                                 try {
                                   o_.cache->get(s);
                                 } catch (...) {
                                   ++compiled_;
                                   throw;
                                 }
                                 ++compiled_;
                               }).share();
  }

  int total() const { return static_cast<int>(futures_.size()); }
  int compiled() const { return compiled_.load(); }

  // Waits for the kernels of `c`, calling `waiting` about every 100 ms meanwhile; false
  // when one of them did not compile (logged once per kernel).
  bool ready(const Candidate& c, const std::function<void()>& waiting) {
    bool ok = true;
    for (const KernelSpec& s : c) {
      const std::shared_future<void>& f = futures_.at(s.hash());
      while (f.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) waiting();
      try {
        f.get();
      } catch (const std::exception& e) {
        ok = false;
        if (failed_.insert(s.hash()).second && o_.log)
          o_.log(LogLevel::warning, fmt::format("autotune: candidate kernel {} does not compile, skipped: {}",
                                                s.uri(), first_line(e.what())));
      }
    }
    return ok;
  }

 private:
  const TunerOptions& o_;
  std::atomic<int> compiled_{0};
  std::unordered_map<std::string, std::shared_future<void>> futures_;
  std::unordered_set<std::string> failed_;
  std::optional<WorkQueue> pool_;  // last: its threads finish before the rest goes
};

// The fastest candidate that beats the default by min_gain and passes the check (the
// default needs no check: it is the reference), else the default.
TuneResult pick_winner(Work& w, const TunerOptions& o) {
  TuneResult r;
  r.key = w.set.key;
  r.heuristic = w.set.candidates.front();
  r.heuristic_ms = w.times.front();
  r.candidates = static_cast<int>(w.times.size());
  for (size_t c = 0; c < w.times.size(); ++c) r.timings.emplace_back(w.set.candidates[c], w.times[c]);
  size_t chosen = 0;
  for (;;) {
    const size_t best = static_cast<size_t>(std::min_element(w.times.begin(), w.times.end()) - w.times.begin());
    const bool beats_default =
        !std::isfinite(r.heuristic_ms) || w.times[best] < r.heuristic_ms * (1.0 - o.min_gain);
    if (!beats_default || best == 0 || !std::isfinite(w.times[best]) || !o.check) {
      chosen = beats_default ? best : 0;
      break;
    }
    std::string problem;
    try {
      problem = o.check(w.set.key, w.set.candidates[best]);
    } catch (const std::exception& e) {  // it ran when timed; a failure now disqualifies it all the same
      problem = fmt::format("the check failed to run it: {}", first_line(e.what()));
    }
    if (problem.empty()) {
      chosen = best;
      break;
    }
    if (o.log)
      o.log(LogLevel::warning, fmt::format("autotune: {}: candidate {} is not used: its outputs differ from the "
                                           "heuristic default's: {}",
                                           w.set.key.name(), candidate_name(w.set.candidates[best]), problem));
    w.times[best] = kInf;
  }
  r.failed = static_cast<int>(std::count(w.times.begin(), w.times.end(), kInf));
  r.winner = w.set.candidates[chosen];
  r.winner_ms = w.times[chosen];
  return r;
}

}  // namespace

const char* to_string(AutotunePolicy policy) {
  switch (policy) {
    case AutotunePolicy::off: return "off";
    case AutotunePolicy::cached: return "cached";
    case AutotunePolicy::startup: return "startup";
    case AutotunePolicy::full: return "full";
  }
  return "?";
}

AutotunePolicy effective_autotune_policy(AutotunePolicy option) {
  return autotune_policy_from_env().value_or(option);
}

std::vector<TuneResult> autotune(TuningDb& db, std::span<const TuningKey> keys, bool retune, const TunerOptions& o) {
  if (!o.timer) throw Error(Status::internal, "autotune: TunerOptions::timer is empty");
  if (o.rounds < 1) throw Error(Status::invalid_argument, fmt::format("autotune: rounds is {}, expected >= 1", o.rounds));
  const Clock::time_point start = Clock::now();
  std::vector<TuningKey> distinct;
  for (const TuningKey& key : keys)
    if (std::find(distinct.begin(), distinct.end(), key) == distinct.end()) distinct.push_back(key);
  std::vector<TuneResult> results(distinct.size());
  std::vector<Work> work;
  for (size_t i = 0; i < distinct.size(); ++i) {
    const TuningKey& key = distinct[i];
    CandidateSet set = tuning_candidates(key, o.device.limits);
    if (!retune) {
      if (auto e = db.find(o.device.identity, key, set.hash)) {
        TuneResult r;
        r.key = key;
        r.winner = e->kernels;
        r.heuristic = set.candidates.front();
        r.winner_ms = e->median_ms;
        r.heuristic_ms = e->heuristic_ms;
        r.candidates = e->candidates;
        r.failed = e->failed;
        r.cached = true;
        results[i] = std::move(r);
        continue;
      }
    }
    const size_t n = set.candidates.size();
    work.push_back(Work{i, std::move(set), std::vector<double>(n, kInf)});
  }

  TuneProgress progress;
  for (const Work& w : work) progress.to_time += static_cast<int>(w.set.candidates.size()) * o.rounds;
  std::optional<CompileQueue> compiles;
  if (o.cache && !work.empty()) compiles.emplace(work, o);
  if (compiles) progress.to_compile = compiles->total();
  auto report = [&](TuneProgress::Phase phase) {
    progress.phase = phase;
    if (compiles) progress.compiled = compiles->compiled();
    progress.elapsed_s = seconds_since(start);
    progress.eta_s = progress.timed > 0 ? progress.elapsed_s / progress.timed * (progress.to_time - progress.timed) : -1;
    if (o.progress) o.progress(progress);
  };

  std::vector<std::pair<TuningKey, TunedEntry>> winners;
  for (Work& w : work) {
    progress.current = w.set.key.name();
    double best_ms = kInf;
    const size_t n = w.set.candidates.size();
    std::vector<std::vector<double>> samples(n);
    std::vector<bool> dropped(n, false);  // did not compile, failed or was given up on: not timed again
    for (int round = 0; round < o.rounds; ++round)
      for (size_t c = 0; c < n; ++c) {
        const Candidate& candidate = w.set.candidates[c];
        dropped[c] = dropped[c] ||
                     (compiles && !compiles->ready(candidate, [&] { report(TuneProgress::Phase::compiling); }));
        if (!dropped[c]) {
          try {
            const double ms = o.timer(w.set.key, candidate, best_ms * (1.0 + o.race_margin));
            if (std::isfinite(ms) && ms >= 0) {
              samples[c].push_back(ms);
              best_ms = std::min(best_ms, ms);
            } else {
              dropped[c] = true;
            }
          } catch (const std::exception& e) {
            dropped[c] = true;
            if (o.log)
              o.log(LogLevel::warning, fmt::format("autotune: {}: candidate {} failed to run, skipped: {}",
                                                   w.set.key.name(), candidate_name(candidate), first_line(e.what())));
          }
        }
        ++progress.timed;
        report(TuneProgress::Phase::timing);
      }
    for (size_t c = 0; c < n; ++c) w.times[c] = dropped[c] ? kInf : median(samples[c]);
    TuneResult r = pick_winner(w, o);
    if (!std::isfinite(r.winner_ms)) {
      if (o.log)
        o.log(LogLevel::warning,
              fmt::format("autotune: {}: every candidate failed; the heuristic table stays in use", r.key.name()));
    } else {
      if (o.log)
        o.log(LogLevel::info, fmt::format("autotune: {}: {} in {:.3f} ms (heuristic {:.3f} ms)", r.key.name(),
                                          candidate_name(r.winner), r.winner_ms, r.heuristic_ms));
      winners.push_back({r.key, TunedEntry{w.set.hash, r.winner, r.winner_ms, r.heuristic_ms, r.candidates, r.failed}});
    }
    results[w.index] = std::move(r);
  }
  if (!winners.empty()) db.store(o.device, winners);

  progress.current.clear();
  report(TuneProgress::Phase::done);
  return results;
}

TuneOutcome to_outcome(const TuneResult& r) {
  TuneOutcome out;
  out.key = r.key.name();
  out.winner = candidate_name(r.winner);
  out.heuristic = candidate_name(r.heuristic);
  out.winner_ms = r.winner_ms;
  out.heuristic_ms = r.heuristic_ms;
  out.candidates = r.candidates;
  out.failed = r.failed;
  out.cached = r.cached;
  return out;
}

}  // namespace flashgen
