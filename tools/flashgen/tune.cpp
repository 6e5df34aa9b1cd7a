// `flashgen tune`: autotunes tile sizes for this GPU ahead of time and prints each
// winner with its margin over the heuristic default. The winners go to
// <cache dir>/autotune.json, where every Runtime (policy cached and up) finds them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>

#include "compiler/tuning_candidates.h"
#include "runtime/autotune.h"
#include "runtime/autotune_db.h"
#include "runtime/autotune_gpu.h"
#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/kernel_cache.h"
#include "tools/flashgen/commands.h"
#include "tools/flashgen/problem_set.h"
#include "tools/flashgen/status_line.h"

namespace flashgen::cli {
namespace {

struct TuneOptions {
  ProblemSetOptions problems;  // --head-dims, --dtypes, --causal, --seqlens, --passes
  bool softcap = false;
  bool window = false;
  bool deterministic = false;
  bool full = false;
  bool list = false;
  bool times = false;
  int rounds = 1;
  std::string arch = "sm_90a";
  std::string cache_dir;
};

std::vector<TuneShape> shapes_of(const TuneOptions& o) {
  ProblemSetOptions set = o.problems;
  set.window = {o.window};
  set.softcap = {o.softcap};
  set.deterministic = {o.deterministic};
  return problem_shapes(set);
}

std::vector<TuningKey> keys_of(const std::vector<TuneShape>& shapes, Arch arch) {
  std::vector<TuningKey> keys;
  for (const TuneShape& s : shapes)
    for (const TuningKey& k : tuning_keys(s, arch))
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

// The tiles of the kernels a pass varies ("m128n64 w8s2"; backward: dK/dV, and dQ when deterministic).
std::string tiles(const Candidate& c) {
  std::string out;
  for (const KernelSpec& s : c)
    if (s.uses_tensor_cores())
      out += fmt::format("{}{}m{}n{} w{}s{}{}", out.empty() ? "" : " + ", s.pass == Pass::bwd_dq ? "dq " : "",
                         s.block_m, s.block_n, s.warps, s.stages, s.persistent ? " persistent" : "");
  return out;
}

std::string ms_text(double ms) { return std::isfinite(ms) ? fmt::format("{:.3f}", ms) : "failed"; }

void list_candidates(const TuneOptions& o) {
  const auto arch = parse_arch(o.arch);
  if (!arch) throw Error(Status::invalid_argument, fmt::format("--arch: got '{}', expected sm_80..sm_90a", o.arch));
  for (const TuningKey& k : keys_of(shapes_of(o), *arch)) {
    const CandidateSet set = tuning_candidates(k);
    fmt::print("{}  {} candidates  set {}\n", k.name(), set.candidates.size(), set.hash.substr(0, 16));
    for (size_t i = 0; i < set.candidates.size(); ++i)
      fmt::print("  {} {}\n", i == 0 ? "*" : " ", tiles(set.candidates[i]));
  }
}

// A bar redrawn on a terminal; a line per key timed otherwise.
class ProgressView {
 public:
  void operator()(const TuneProgress& p) {
    if (p.phase == TuneProgress::Phase::done) {
      line_.clear();
      return;
    }
    // Kernels compile ahead of timing: the bar follows the timed candidates.
    const std::string counts = fmt::format("timed {}/{} candidates, compiled {}/{} kernels", p.timed, p.to_time,
                                           p.compiled, p.to_compile);
    const std::string eta = p.eta_s >= 0 ? fmt::format("ETA {:.0f} s", p.eta_s) : "ETA ?";
    if (line_.tty()) {
      constexpr int kWidth = 30;
      const int filled = p.to_time > 0 ? kWidth * p.timed / p.to_time : 0;
      line_.show(fmt::format("[{}{}] {}, {}  {}", std::string(filled, '#'), std::string(kWidth - filled, '.'), counts,
                             eta, p.current));
    } else if (p.current != last_key_) {
      line_.show(fmt::format("flashgen tune: {}, {:.1f} s, {}{}", counts, p.elapsed_s, eta,
                             p.current.empty() ? "" : "  " + p.current));
    }
    last_key_ = p.current;
  }

  // Before a log line: the bar's line is cleared, then redrawn by the next update.
  void clear() { line_.clear(); }

 private:
  StatusLine line_;
  std::string last_key_;
};

void print_table(const std::vector<TuneResult>& results) {
  fmt::print("{:<40} {:<28} {:>10} {:>12} {:>8} {:>10}\n", "key", "winner (tiles)", "ms", "heuristic ms", "margin",
             "candidates");
  for (const TuneResult& r : results) {
    const bool is_default = r.winner == r.heuristic;
    std::string margin = "-";
    if (std::isfinite(r.winner_ms) && std::isfinite(r.heuristic_ms) && r.winner_ms > 0)
      margin = fmt::format("{:+.1f}%", 100.0 * (r.heuristic_ms / r.winner_ms - 1.0));
    fmt::print("{:<40} {:<28} {:>10} {:>12} {:>8} {:>10}{}\n", r.key.name(),
               is_default ? "= heuristic" : tiles(r.winner), ms_text(r.winner_ms), ms_text(r.heuristic_ms), margin,
               r.failed ? fmt::format("{} ({} failed)", r.candidates, r.failed) : std::to_string(r.candidates),
               r.cached ? "  cached" : "");
  }
}

// --times: every candidate's median under its key, fastest first.
void print_timings(const std::vector<TuneResult>& results) {
  for (const TuneResult& r : results) {
    if (r.cached) continue;
    std::vector<std::pair<Candidate, double>> sorted = r.timings;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    fmt::print("{}\n", r.key.name());
    for (const auto& [candidate, ms] : sorted) {
      const bool timed = std::isfinite(ms) && std::isfinite(r.heuristic_ms);
      const std::string margin = timed ? fmt::format("{:+.1f}%", 100.0 * (r.heuristic_ms / ms - 1.0)) : "-";
      fmt::print("  {:>10} {:>8}  {}{}\n", ms_text(ms), margin, tiles(candidate),
                 candidate == r.heuristic ? "  (heuristic)" : "");
    }
  }
}

void run_tune(const TuneOptions& o) {
  if (o.list) return list_candidates(o);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TuneShape> shapes = shapes_of(o);
  ensure_context(o.problems.device);
  const DeviceProfile device = query_device_profile(o.problems.device);
  const std::vector<TuningKey> keys = keys_of(shapes, device.arch);

  auto view = std::make_shared<ProgressView>();
  const LogSink base = default_log_sink();
  const LogSink log = [view, base](LogLevel level, const std::string& message) {
    if (level < LogLevel::warning) return;  // the table says what the info lines would
    view->clear();
    base(level, message);
  };
  KernelCacheOptions cache_options;
  cache_options.dir = o.cache_dir;
  cache_options.log = log;
  KernelCache cache(std::move(cache_options));
  const auto ready = std::chrono::steady_clock::now();
  TuningDb db(cache.dir(), log);
  GpuCandidateTimer timer(cache, o.problems.device);

  TunerOptions options;
  options.cache = &cache;
  options.timer = timer.timer();
  options.check = timer.checker();
  options.device = device;
  options.log = log;
  options.progress = [view](const TuneProgress& p) { (*view)(p); };
  if (o.times) options.race_margin = std::numeric_limits<double>::infinity();  // time every candidate in full
  options.rounds = o.rounds;
  const std::vector<TuneResult> results = autotune(db, keys, o.full, options);
  const auto end = std::chrono::steady_clock::now();
  view->clear();

  print_table(results);
  if (o.times) print_timings(results);
  const auto cached = static_cast<size_t>(
      std::count_if(results.begin(), results.end(), [](const TuneResult& r) { return r.cached; }));
  const double total_s = std::chrono::duration<double>(end - start).count();
  const double tune_ms = std::chrono::duration<double, std::milli>(end - ready).count();
  fmt::print("{} keys on {} ({} SMs): {} tuned, {} already persisted; winners in {}\n", results.size(),
             device.identity.gpu_name, device.identity.sm_count, results.size() - cached, cached, db.path().string());
  if (cached == results.size())
    fmt::print("startup with the persisted winners: {:.1f} ms (reading the file, looking up {} keys); {:.2f} s in all\n",
               tune_ms, results.size(), total_s);
  else
    fmt::print("tuning: {:.1f} s (compile + time); {:.1f} s in all with CUDA start-up\n", tune_ms / 1000, total_s);
}

}  // namespace

void register_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  auto* cmd = app.add_subcommand("tune", "autotune tile sizes for this GPU and persist the winners");
  o->problems.add_to(*cmd);
  cmd->add_flag("--window", o->window, "tune the sliding-window kernels (window of seqlen/8 to the left)");
  cmd->add_flag("--softcap", o->softcap, "tune the soft-capping kernels");
  cmd->add_flag("--deterministic", o->deterministic, "tune the deterministic backward (separate dQ kernel)");
  cmd->add_flag("--full", o->full, "retune keys that already have a persisted winner");
  cmd->add_option("--device", o->problems.device, "CUDA device ordinal")->capture_default_str();
  cmd->add_option("--cache-dir", o->cache_dir, "kernel cache and autotune.json directory (default: FLASHGEN_CACHE_DIR)");
  cmd->add_flag("--times", o->times,
                "time every candidate in full (no early give-up) and print each one's median, fastest first; "
                "with --full to retime persisted keys");
  cmd->add_option("--rounds", o->rounds,
                  "time each key's candidates this many times in turn and keep each one's median (with --times: an "
                  "A/B of every candidate in which no position in the set is favoured)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--list-candidates", o->list, "print the candidate sets (for --arch) and exit; needs no GPU");
  cmd->add_option("--arch", o->arch, "arch of --list-candidates")->capture_default_str();
  cmd->callback([o] { run_tune(*o); });
}

}  // namespace flashgen::cli
