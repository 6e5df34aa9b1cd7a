// The tuner and the policy with fake timers (no GPU): it picks the fastest candidate,
// a throwing or non-compiling candidate is infinitely slow, a changed set retunes only
// itself, `cached` and `off` never time anything, and FLASHGEN_AUTOTUNE is parsed with a
// clear error. Compiles go through a real KernelCache with tiny kernels (NVRTC needs no GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <random>

#include "flashgen/flashgen.h"
#include "runtime/autotune.h"
#include "runtime/autotune_selection.h"
#include "runtime/cuda_device.h"
#include "runtime/kernel_cache.h"
#include "tests/cache/cache_test_support.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::read_bytes;
using testing_support::ScopedEnv;
using testing_support::ScratchDir;
using testing_support::write_bytes;

struct Log {
  std::mutex mutex;
  std::vector<std::string> warnings;
  LogSink sink() {
    return [this](LogLevel level, const std::string& m) {
      std::lock_guard lock(mutex);
      if (level >= LogLevel::warning) warnings.push_back(m);
    };
  }
};

DeviceProfile profile() {
  DeviceProfile p;
  p.identity.gpu_name = "Fake GPU";
  p.identity.sm_count = 7;
  p.identity.driver_version = 1;
  p.identity.nvrtc_version = "0.0";
  p.arch = Arch::sm_90a;
  return p;
}

TuningKey key(int head_dim, TunedPass pass = TunedPass::forward, long long bucket = 4096) {
  TuningKey k;
  k.pass = pass;
  k.head_dim = head_dim;
  k.seqlen_bucket = bucket;
  k.arch = Arch::sm_90a;
  return k;
}

// A fake timer: a fresh random time per candidate (drawn once), counting its calls.
struct FakeTimer {
  std::mt19937 rng;
  std::map<std::string, double> times;
  std::vector<std::string> throwing;  // candidate names that "fail to launch"
  int calls = 0;

  explicit FakeTimer(unsigned seed) : rng(seed) {}
  double time_of(const TuningKey& k, const Candidate& c) {
    const std::string name = k.name() + "/" + candidate_name(c);
    auto it = times.find(name);
    if (it == times.end()) it = times.emplace(name, std::uniform_real_distribution<double>(1.0, 2.0)(rng)).first;
    return it->second;
  }
  std::vector<double> beats;  // the time to beat of each call
  // Every other candidate beats the default (whose time is above the whole draw range).
  void make_default_slowest(const TuningKey& k) {
    for (const Candidate& c : tuning_candidates(k).candidates) time_of(k, c);
    times[k.name() + "/" + candidate_name(heuristic_candidate(k))] = 10.0;
  }
  CandidateTimer timer() {
    return [this](const TuningKey& k, const Candidate& c, double beat_ms) {
      ++calls;
      beats.push_back(beat_ms);
      if (std::find(throwing.begin(), throwing.end(), candidate_name(c)) != throwing.end())
        throw Error(Status::cuda_error, "cuLaunchKernel failed: too many resources requested for launch");
      return time_of(k, c);
    };
  }
};

TunerOptions options(FakeTimer& timer, Log& log) {
  TunerOptions o;
  o.timer = timer.timer();
  o.device = profile();
  o.log = log.sink();
  o.min_gain = 0;
  return o;
}

// The candidate with the least fake time, skipping `excluded`.
size_t fastest(FakeTimer& t, const TuningKey& k, const std::vector<std::string>& excluded = {}) {
  const CandidateSet set = tuning_candidates(k);
  size_t best = set.candidates.size();
  for (size_t i = 0; i < set.candidates.size(); ++i) {
    if (std::find(excluded.begin(), excluded.end(), candidate_name(set.candidates[i])) != excluded.end()) continue;
    if (best == set.candidates.size() || t.time_of(k, set.candidates[i]) < t.time_of(k, set.candidates[best])) best = i;
  }
  return best;
}

TEST(Autotune, PicksTheFastestCandidateAndPersistsIt) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  ScratchDir dir;
  Log log;
  FakeTimer timer(seed);
  const std::vector<TuningKey> keys = {key(128), key(64, TunedPass::backward)};
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuneResult> results = autotune(db, keys, false, options(timer, log));
  ASSERT_EQ(results.size(), 2u);
  int expected_calls = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const CandidateSet set = tuning_candidates(keys[i]);
    expected_calls += static_cast<int>(set.candidates.size());
    const TuneResult& r = results[i];
    EXPECT_EQ(r.key, keys[i]);
    EXPECT_FALSE(r.cached);
    EXPECT_EQ(r.candidates, static_cast<int>(set.candidates.size()));
    EXPECT_EQ(r.failed, 0);
    EXPECT_EQ(r.winner, set.candidates[fastest(timer, keys[i])]);
    EXPECT_DOUBLE_EQ(r.winner_ms, timer.time_of(keys[i], r.winner));
    EXPECT_DOUBLE_EQ(r.heuristic_ms, timer.time_of(keys[i], set.candidates[0]));
    ASSERT_EQ(r.timings.size(), set.candidates.size());  // `flashgen tune --times` lists these
    for (size_t c = 0; c < set.candidates.size(); ++c) {
      EXPECT_EQ(r.timings[c].first, set.candidates[c]);
      EXPECT_DOUBLE_EQ(r.timings[c].second, timer.time_of(keys[i], set.candidates[c]));
    }
    const auto stored = TuningDb(dir.path(), nullptr).find(profile().identity, keys[i], set.hash);
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->kernels, r.winner);
  }
  EXPECT_EQ(timer.calls, expected_calls);
  EXPECT_THAT(log.warnings, ::testing::IsEmpty());
}

// Rounds (`flashgen tune --rounds`): the candidates are timed in turn, A B C, A B C, ..., each
// keeps the median of its rounds, and one that fails in a round is not timed again.
TEST(Autotune, RoundsTimeTheCandidatesInTurnAndKeepEachOnesMedian) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ScratchDir dir;
  Log log;
  const TuningKey k = key(128);
  const CandidateSet set = tuning_candidates(k);
  const size_t n = set.candidates.size();
  ASSERT_GE(n, 3u);
  // Round r of candidate c takes times[c][r]; candidate 1 throws in its second round.
  std::vector<std::vector<double>> times(n);
  for (auto& t : times)
    for (int r = 0; r < 3; ++r) t.push_back(std::uniform_real_distribution<double>(1.0, 2.0)(rng));
  std::vector<size_t> order;
  std::vector<int> round_of(n, 0);
  TunerOptions o;
  o.device = profile();
  o.log = log.sink();
  o.min_gain = 0;
  o.race_margin = std::numeric_limits<double>::infinity();
  o.rounds = 3;
  o.timer = [&](const TuningKey&, const Candidate& c, double) {
    const size_t i = static_cast<size_t>(std::find(set.candidates.begin(), set.candidates.end(), c) -
                                         set.candidates.begin());
    order.push_back(i);
    const int r = round_of[i]++;
    if (i == 1 && r == 1) throw Error(Status::cuda_error, "cuLaunchKernel failed");
    return times[i][r];
  };
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuneResult> results = autotune(db, std::vector<TuningKey>{k}, true, o);
  ASSERT_EQ(results.size(), 1u);
  // In turn: the whole set, then again without candidate 1 after its failure.
  std::vector<size_t> expected;
  for (int r = 0; r < 3; ++r)
    for (size_t c = 0; c < n; ++c)
      if (c != 1 || r < 2) expected.push_back(c);
  EXPECT_EQ(order, expected);
  const TuneResult& res = results[0];
  ASSERT_EQ(res.timings.size(), n);
  for (size_t c = 0; c < n; ++c) {
    std::vector<double> t = times[c];
    std::sort(t.begin(), t.end());
    EXPECT_DOUBLE_EQ(res.timings[c].second, c == 1 ? std::numeric_limits<double>::infinity() : t[1]) << c;
  }
  EXPECT_EQ(res.failed, 1);
  EXPECT_THAT(log.warnings, ::testing::ElementsAre(HasSubstr("failed to run")));
  o.rounds = 0;
  EXPECT_THROW(autotune(db, std::vector<TuningKey>{k}, true, o), Error);
}

// Racing: each candidate is told the time it must beat, the best so far of its key plus
// the race margin (infinity for the first).
TEST(Autotune, EachCandidateIsToldTheBestTimeSoFarPlusTheRaceMargin) {
  ScratchDir dir;
  Log log;
  FakeTimer timer(std::random_device{}());
  const TuningKey k = key(128, TunedPass::backward);
  const std::vector<TuningKey> keys = {k};
  TuningDb db(dir.path(), log.sink());
  TunerOptions o = options(timer, log);
  o.race_margin = 0.25;
  autotune(db, keys, false, o);
  const CandidateSet set = tuning_candidates(k);
  ASSERT_EQ(timer.beats.size(), set.candidates.size());
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < set.candidates.size(); ++i) {
    EXPECT_DOUBLE_EQ(timer.beats[i], best * 1.25) << "candidate " << i;
    best = std::min(best, timer.time_of(k, set.candidates[i]));
  }
}

// The fastest candidate wins only when its outputs pass the check; one that fails is
// logged, counted as failed, and the next fastest is asked.
TEST(Autotune, AWinnerWhoseOutputsDifferGivesWayToTheNextFastest) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  ScratchDir dir;
  Log log;
  FakeTimer timer(seed);
  const TuningKey k = key(64, TunedPass::backward);
  const CandidateSet set = tuning_candidates(k);
  ASSERT_GE(set.candidates.size(), 3u);
  timer.make_default_slowest(k);
  const size_t first = fastest(timer, k);
  const size_t second = fastest(timer, k, {candidate_name(set.candidates[first])});
  std::vector<std::string> checked;
  TunerOptions o = options(timer, log);
  o.check = [&](const TuningKey&, const Candidate& c) -> std::string {
    checked.push_back(candidate_name(c));
    return c == set.candidates[first] ? "dq sample 3: 7 where the default gives 1" : "";
  };
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  const TuneResult r = autotune(db, keys, false, o).at(0);
  EXPECT_EQ(r.winner, set.candidates[second]);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(checked, (std::vector<std::string>{candidate_name(set.candidates[first]),
                                               candidate_name(set.candidates[second])}));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr("outputs differ"));
  EXPECT_THAT(log.warnings[0], HasSubstr("dq sample 3"));
}

// A check that throws (the candidate fails to launch this time) disqualifies the candidate
// like a mismatch: tuning goes on with the next fastest.
TEST(Autotune, ACheckThatThrowsDisqualifiesTheCandidate) {
  ScratchDir dir;
  Log log;
  FakeTimer timer(std::random_device{}());
  const TuningKey k = key(128);
  const CandidateSet set = tuning_candidates(k);
  timer.make_default_slowest(k);
  const size_t first = fastest(timer, k);
  TunerOptions o = options(timer, log);
  o.check = [&](const TuningKey&, const Candidate& c) -> std::string {
    if (c == set.candidates[first]) throw Error(Status::cuda_error, "cuLaunchKernel failed\nmore lines");
    return "";
  };
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  const TuneResult r = autotune(db, keys, false, o).at(0);
  EXPECT_EQ(r.winner, set.candidates[fastest(timer, k, {candidate_name(set.candidates[first])})]);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr("the check failed to run it: cuLaunchKernel failed"));
  EXPECT_THAT(log.warnings[0], ::testing::Not(HasSubstr("more lines")));
}

TEST(Autotune, AThrowingCandidateIsInfinitelySlowAndTuningGoesOn) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  ScratchDir dir;
  Log log;
  FakeTimer timer(seed);
  const TuningKey k = key(128, TunedPass::backward);
  const CandidateSet set = tuning_candidates(k);
  const std::string broken = candidate_name(set.candidates[fastest(timer, k)]);
  timer.throwing = {broken};
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  const TuneResult r = autotune(db, keys, false, options(timer, log)).at(0);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(timer.calls, static_cast<int>(set.candidates.size()));
  EXPECT_EQ(r.winner, set.candidates[fastest(timer, k, {broken})]);
  EXPECT_NE(candidate_name(r.winner), broken);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr(broken));
  EXPECT_THAT(log.warnings[0], HasSubstr("too many resources"));
}

TEST(Autotune, WhenEveryCandidateFailsNothingIsPersisted) {
  ScratchDir dir;
  Log log;
  FakeTimer timer(1);
  const TuningKey k = key(64);
  for (const Candidate& c : tuning_candidates(k).candidates) timer.throwing.push_back(candidate_name(c));
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  const TuneResult r = autotune(db, keys, false, options(timer, log)).at(0);
  EXPECT_EQ(r.failed, r.candidates);
  EXPECT_TRUE(std::isinf(r.winner_ms));
  EXPECT_EQ(r.winner, heuristic_candidate(k));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "autotune.json"));
  EXPECT_THAT(log.warnings.back(), HasSubstr("every candidate failed"));
}

TEST(Autotune, ATieWithinTheMinimumGainKeepsTheDefault) {
  ScratchDir dir;
  Log log;
  const TuningKey k = key(128);
  const Candidate def = heuristic_candidate(k);
  int calls = 0;
  TunerOptions o;
  o.device = profile();
  o.log = log.sink();
  o.min_gain = 0.02;
  // Every other candidate is 1% faster than the default: noise, not a win.
  o.timer = [&](const TuningKey&, const Candidate& c, double) {
    ++calls;
    return c == def ? 1.0 : 0.99;
  };
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  EXPECT_EQ(autotune(db, keys, false, o).at(0).winner, def);
  // 5% faster is a win.
  o.timer = [&](const TuningKey&, const Candidate& c, double) { return c == def ? 1.0 : 0.95; };
  EXPECT_NE(autotune(db, keys, true, o).at(0).winner, def);
}

TEST(Autotune, PersistedWinnersAreReusedAndAChangedSetRetunesOnlyItself) {
  ScratchDir dir;
  Log log;
  FakeTimer timer(std::random_device{}());
  const std::vector<TuningKey> keys = {key(128), key(64), key(128), key(128, TunedPass::backward, 1024)};
  const int n128 = static_cast<int>(tuning_candidates(keys[0]).candidates.size());
  {
    TuningDb db(dir.path(), log.sink());
    const auto results = autotune(db, keys, false, options(timer, log));
    EXPECT_EQ(results.size(), 3u) << "duplicate keys are tuned once";
  }
  const int first = timer.calls;
  {
    TuningDb db(dir.path(), log.sink());
    const auto results = autotune(db, keys, false, options(timer, log));
    EXPECT_EQ(timer.calls, first) << "every winner was persisted";
    for (const TuneResult& r : results) EXPECT_TRUE(r.cached);
  }
  // Another candidate set for fwd d128 (as if its tiles changed): only that key is retuned.
  nlohmann::json file = nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"));
  file["devices"][profile().identity.key()]["entries"][keys[0].name()]["candidate_set"] = "an older set";
  write_bytes(dir.path() / "autotune.json", file.dump());
  TuningDb db(dir.path(), log.sink());
  const auto results = autotune(db, keys, false, options(timer, log));
  EXPECT_EQ(timer.calls, first + n128);
  EXPECT_FALSE(results[0].cached);
  EXPECT_TRUE(results[1].cached);
  EXPECT_TRUE(results[2].cached);
  // retune: everything is timed again.
  autotune(db, keys, true, options(timer, log));
  EXPECT_EQ(timer.calls, 2 * first + n128);
}

TEST(Autotune, CandidatesCompileAheadOfTimingAndOneThatDoesNotCompileIsSkipped) {
  ScratchDir dir;
  Log log;
  const TuningKey k = key(64);
  const CandidateSet set = tuning_candidates(k);
  const KernelSpec broken = set.candidates.at(1).front();
  KernelCacheOptions cache_options;
  cache_options.dir = dir.path() / "kernels";
  cache_options.log = log.sink();
  cache_options.compile_threads = 2;
  // Tiny kernels compile in tens of ms; one spec gets source NVRTC rejects.
  cache_options.generate = [broken](const KernelSpec& s) {
    GeneratedSource src = testing_support::tiny_kernel(s);
    if (s == broken) src.source += "this is not CUDA;\n";
    return src;
  };
  KernelCache cache(std::move(cache_options));
  FakeTimer timer(std::random_device{}());
  TunerOptions o = options(timer, log);
  o.cache = &cache;
  std::vector<TuneProgress> progress;
  o.progress = [&](const TuneProgress& p) { progress.push_back(p); };
  TuningDb db(dir.path(), log.sink());
  const std::vector<TuningKey> keys = {k};
  const TuneResult r = autotune(db, keys, false, o).at(0);

  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(timer.calls, r.candidates - 1) << "the candidate that did not compile is not timed";
  EXPECT_NE(r.winner, set.candidates[1]);
  EXPECT_EQ(cache.stats().compiles, static_cast<long>(set.candidates.size()) - 1) << "one compile failed";
  ASSERT_FALSE(log.warnings.empty());
  EXPECT_THAT(log.warnings[0], HasSubstr(broken.uri()));
  EXPECT_THAT(log.warnings[0], HasSubstr("does not compile"));

  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().phase, TuneProgress::Phase::done);
  for (size_t i = 1; i < progress.size(); ++i) {
    EXPECT_GE(progress[i].compiled, progress[i - 1].compiled);
    EXPECT_EQ(progress[i].timed, progress[i - 1].timed + (progress[i].phase == TuneProgress::Phase::timing));
  }
  EXPECT_EQ(progress.back().compiled, static_cast<int>(set.candidates.size()));
  EXPECT_EQ(progress.back().to_compile, static_cast<int>(set.candidates.size()));
  EXPECT_EQ(progress.back().timed, r.candidates);
}

TEST(AutotunePolicy, CachedAndOffNeverTimeStartupTunesWhatIsMissingFullRetunes) {
  ScratchDir dir;
  Log log;
  FakeTimer timer(std::random_device{}());
  const TuningKey k = key(128);
  const std::vector<TuningKey> keys = {k};
  ProblemKey problem = tuning_problem(k);
  problem.batch = 3;  // any problem of the bucket
  problem.seqlen_q = problem.seqlen_k = 3000;

  for (AutotunePolicy p : {AutotunePolicy::off, AutotunePolicy::cached}) {
    KernelSelector selector(p, dir.path(), log.sink());
    EXPECT_THAT(selector.tune_declared(keys, options(timer, log)), ::testing::IsEmpty());
    EXPECT_EQ(selector.select(problem, TunedPass::forward, profile(), 0), heuristic_candidate(k));
  }
  EXPECT_EQ(timer.calls, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "autotune.json"));

  // Make the default the slowest, so that the winner differs from it.
  for (const Candidate& c : tuning_candidates(k).candidates) timer.times[k.name() + "/" + candidate_name(c)] = 1.0;
  timer.times[k.name() + "/" + candidate_name(heuristic_candidate(k))] = 5.0;
  {
    KernelSelector startup(AutotunePolicy::startup, dir.path(), log.sink());
    EXPECT_EQ(startup.tune_declared(keys, options(timer, log)).size(), 1u);
    const int calls = timer.calls;
    EXPECT_GT(calls, 0);
    EXPECT_NE(startup.select(problem, TunedPass::forward, profile(), 0), heuristic_candidate(k));
    startup.tune_declared(keys, options(timer, log));
    EXPECT_EQ(timer.calls, calls) << "startup tunes only what has no winner";
  }
  const Candidate winner = KernelSelector(AutotunePolicy::cached, dir.path(), log.sink())
                               .select(problem, TunedPass::forward, profile(), 0);
  EXPECT_NE(winner, heuristic_candidate(k)) << "cached uses the persisted winner";
  EXPECT_EQ(KernelSelector(AutotunePolicy::off, dir.path(), log.sink()).select(problem, TunedPass::forward, profile(), 0),
            heuristic_candidate(k))
      << "off ignores it";
  DeviceProfile other = profile();
  other.identity.driver_version = 2;
  EXPECT_EQ(KernelSelector(AutotunePolicy::cached, dir.path(), log.sink())
                .select(problem, TunedPass::forward, other, 0),
            heuristic_candidate(k))
      << "another driver does not use it";
  const int before_full = timer.calls;
  KernelSelector full(AutotunePolicy::full, dir.path(), log.sink());
  full.tune_declared(keys, options(timer, log));
  EXPECT_EQ(timer.calls - before_full, static_cast<int>(tuning_candidates(k).candidates.size()));
}

TEST(AutotunePolicy, TheEnvironmentWinsOverTheOptionAndABadValueIsNamed) {
  {
    ScopedEnv unset("FLASHGEN_AUTOTUNE", std::nullopt);
    EXPECT_EQ(effective_autotune_policy(AutotunePolicy::startup), AutotunePolicy::startup);
  }
  {
    ScopedEnv off("FLASHGEN_AUTOTUNE", "off");
    EXPECT_EQ(effective_autotune_policy(AutotunePolicy::full), AutotunePolicy::off);
  }
  ScopedEnv bad("FLASHGEN_AUTOTUNE", "always");
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (attempt == 0)
        effective_autotune_policy(AutotunePolicy::cached);
      else
        Runtime rt;
      ADD_FAILURE() << "a bad FLASHGEN_AUTOTUNE was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_AUTOTUNE"));
      EXPECT_THAT(e.what(), HasSubstr("'always'"));
      for (const char* allowed : {"off", "cached", "startup", "full"}) EXPECT_THAT(e.what(), HasSubstr(allowed));
    }
  }
  flashgen_runtime* rt = nullptr;
  EXPECT_EQ(flashgen_runtime_create(nullptr, &rt), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("FLASHGEN_AUTOTUNE"));
}

TEST(AutotuneRuntime, TuneShapesAreValidatedBeforeAnyDeviceWork) {
  ScopedEnv unset("FLASHGEN_AUTOTUNE", std::nullopt);
  Runtime rt;
  TuneShape bad;
  bad.head_dim = 300;
  try {
    rt.tune({TuneShape{}, bad});
    ADD_FAILURE() << "head_dim 300 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("tune_shapes[1].head_dim: is 300"));
  }
  TuneShape fp32;
  fp32.dtype = DType::f32;
  EXPECT_THROW(rt.tune({fp32}), Error);
}

TEST(AutotuneRuntime, StartupWithoutAGpuWarnsAndStarts) {
  if (cuda_available()) GTEST_SKIP() << "this machine has a GPU: the gpu label covers startup tuning";
  ScopedEnv unset("FLASHGEN_AUTOTUNE", std::nullopt);
  ScratchDir dir;
  Log log;
  RuntimeOptions o;
  o.cache_dir = dir.path().string();
  o.autotune = AutotunePolicy::startup;
  o.log = log.sink();
  o.tune_shapes = {TuneShape{}};
  Runtime rt(o);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr("no GPU"));
}

}  // namespace
}  // namespace flashgen
