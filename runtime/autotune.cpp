#include "runtime/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <thread>
#include <thread_pool/thread_pool.hpp>
#include <unordered_set>

#include "runtime/environment.h"
#include "runtime/kernel_cache.h"

namespace flashgen {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The first line of an error: NVRTC errors carry the whole compile log.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

struct Work {
  size_t index;  // position in the results
  CandidateSet set;
  std::vector<double> times;      // per candidate; +inf: failed
  std::vector<bool> compiled_ok;  // per candidate
};

// Compiles every distinct kernel of the sets in parallel; marks candidates with a kernel
// that failed to compile.
void compile_all(std::vector<Work>& work, const TunerOptions& o, TuneProgress& progress, Clock::time_point start) {
  std::vector<KernelSpec> specs;
  std::unordered_set<std::string> seen;
  for (const Work& w : work)
    for (const Candidate& c : w.set.candidates)
      for (const KernelSpec& s : c)
        if (seen.insert(s.hash()).second) specs.push_back(s);

  progress.phase = TuneProgress::Phase::compiling;
  progress.to_compile = static_cast<int>(specs.size());
  if (o.progress) o.progress(progress);

  const size_t threads = o.compile_threads > 0 ? o.compile_threads : std::max(1u, std::thread::hardware_concurrency());
  std::unordered_set<std::string> failed;
  {
    thread_pool::ThreadPool pool(std::max<size_t>(1, std::min(threads, specs.size())));
    std::vector<std::future<void>> done;
    for (const KernelSpec& s : specs) done.push_back(pool.Submit([&o, s] { o.cache->get(s); }));
    for (size_t i = 0; i < done.size(); ++i) {
      try {
        done[i].get();
      } catch (const std::exception& e) {
        failed.insert(specs[i].hash());
        if (o.log)
          o.log(LogLevel::warning, fmt::format("autotune: candidate kernel {} does not compile, skipped: {}",
                                               specs[i].uri(), first_line(e.what())));
      }
      ++progress.compiled;
      progress.elapsed_s = seconds_since(start);
      progress.eta_s = progress.elapsed_s / progress.compiled * (progress.to_compile - progress.compiled);
      if (o.progress) o.progress(progress);
    }
  }
  for (Work& w : work)
    for (size_t c = 0; c < w.set.candidates.size(); ++c)
      w.compiled_ok[c] = std::none_of(w.set.candidates[c].begin(), w.set.candidates[c].end(),
                                      [&](const KernelSpec& s) { return failed.count(s.hash()) > 0; });
}

TuneResult pick_winner(const Work& w, double min_gain) {
  TuneResult r;
  r.key = w.set.key;
  r.heuristic = w.set.candidates.front();
  r.heuristic_ms = w.times.front();
  r.candidates = static_cast<int>(w.times.size());
  r.failed = static_cast<int>(std::count(w.times.begin(), w.times.end(), kInf));
  const size_t best = static_cast<size_t>(std::min_element(w.times.begin(), w.times.end()) - w.times.begin());
  const bool beats_default = !std::isfinite(r.heuristic_ms) || w.times[best] < r.heuristic_ms * (1.0 - min_gain);
  const size_t chosen = beats_default ? best : 0;
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
  const Clock::time_point start = Clock::now();
  std::vector<TuningKey> distinct;
  for (const TuningKey& key : keys)
    if (std::find(distinct.begin(), distinct.end(), key) == distinct.end()) distinct.push_back(key);
  std::vector<TuneResult> results(distinct.size());
  std::vector<Work> work;
  for (size_t i = 0; i < distinct.size(); ++i) {
    const TuningKey& key = distinct[i];
    CandidateSet set = tuning_candidates(key, o.limits);
    if (!retune) {
      if (auto e = db.find(o.device, key, set.hash)) {
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
    work.push_back(Work{i, std::move(set), std::vector<double>(n, kInf), std::vector<bool>(n, true)});
  }

  TuneProgress progress;
  for (const Work& w : work) progress.to_time += static_cast<int>(w.set.candidates.size());
  if (o.cache && !work.empty()) compile_all(work, o, progress, start);

  progress.phase = TuneProgress::Phase::timing;
  const Clock::time_point timing_start = Clock::now();
  std::vector<std::pair<TuningKey, TunedEntry>> winners;
  for (Work& w : work) {
    progress.current = w.set.key.name();
    for (size_t c = 0; c < w.set.candidates.size(); ++c) {
      const Candidate& candidate = w.set.candidates[c];
      if (w.compiled_ok[c]) {
        try {
          const double ms = o.timer(w.set.key, candidate);
          w.times[c] = std::isfinite(ms) && ms >= 0 ? ms : kInf;
        } catch (const std::exception& e) {
          if (o.log)
            o.log(LogLevel::warning, fmt::format("autotune: {}: candidate {} failed to run, skipped: {}",
                                                 w.set.key.name(), candidate_name(candidate), first_line(e.what())));
        }
      }
      ++progress.timed;
      progress.elapsed_s = seconds_since(start);
      const double timing_s = seconds_since(timing_start);
      progress.eta_s = timing_s / progress.timed * (progress.to_time - progress.timed);
      if (o.progress) o.progress(progress);
    }
    TuneResult r = pick_winner(w, o.min_gain);
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

  progress.phase = TuneProgress::Phase::done;
  progress.elapsed_s = seconds_since(start);
  progress.eta_s = 0;
  progress.current.clear();
  if (o.progress) o.progress(progress);
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
