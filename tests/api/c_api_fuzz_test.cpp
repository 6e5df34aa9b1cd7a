// Fuzzing the C API (issue 17): seeded random valid calls on CPU tensors, each checked
// against the fp64 reference, and the same calls broken by one mutation each, which must be
// refused with a status, a message naming the argument, and no byte of any buffer changed.
// Every buffer holds exactly the bytes its views span, so under ASan any access outside a
// view fails the test. The same calls on device ordinals (no GPU here) must fail cleanly.
//
// Reproducible: FLASHGEN_FUZZ_SEED (default 17) seeds everything; case i draws from
// (seed, i). FLASHGEN_FUZZ_CASES (default 1500) random calls, each tried valid and with
// several mutations; FLASHGEN_FUZZ_SECONDS (default 45 unless FLASHGEN_FUZZ_CASES is set,
// then none; 0: none) bounds the run, so CI stays fast. A longer local run:
//   FLASHGEN_FUZZ_CASES=20000 api_tests --gtest_filter='CApiFuzz.*'
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_call.h"
#include "fuzz_mutations.h"
#include "runtime/cuda_driver.h"

namespace flashgen::test::fuzz {
namespace {

// Test knobs, read once here (they are the test's, not flashgen's: no runtime registry entry).
template <typename T>
std::optional<T> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  T value{};
  const char* end = text + std::strlen(text);
  const auto [at, error] = std::from_chars(text, end, value);
  if (error != std::errc() || at != end) throw std::invalid_argument(fmt::format("{}: is '{}', expected a number", name, text));
  return value;
}

struct Config {
  std::uint64_t seed = 17;
  std::int64_t cases = 1500;
  double seconds = 45;  // 0: no bound
  int mutations_per_case = 8;
};

Config config_from_env() {
  Config c;
  if (auto seed = env_number<std::uint64_t>("FLASHGEN_FUZZ_SEED")) c.seed = *seed;
  if (auto cases = env_number<std::int64_t>("FLASHGEN_FUZZ_CASES")) c.cases = *cases, c.seconds = 0;
  if (auto seconds = env_number<double>("FLASHGEN_FUZZ_SECONDS")) c.seconds = *seconds;
  return c;
}

// Calls tried per area, refused (or, for valid calls, passed) as expected, and failures.
struct Count {
  std::int64_t tried = 0, as_expected = 0, failures = 0, skipped = 0;
  std::map<std::string, std::int64_t> statuses;  // what the calls returned
};

class Fuzzer {
 public:
  explicit Fuzzer(const Config& config) : config_(config) {
    flashgen_runtime_options options;
    flashgen_runtime_options_init(&options);
    options.autotune = 0;
    options.cpu_threads = 2;
    EXPECT_EQ(flashgen_runtime_create(&options, &runtime_), FLASHGEN_OK) << flashgen_last_error();
  }
  ~Fuzzer() { flashgen_runtime_destroy(runtime_); }

  void run_case(std::int64_t index) {
    std::seed_seq seq{static_cast<std::uint32_t>(config_.seed), static_cast<std::uint32_t>(config_.seed >> 32),
                      static_cast<std::uint32_t>(index)};
    std::mt19937_64 rng(seq);
    FuzzCall call = random_call(rng);
    context_ = fmt::format("seed {} case {} ({})", config_.seed, index, call.describe());
    valid_calls(call, rng);
    const auto before = call.snapshot();
    for (int i = 0; i < config_.mutations_per_case; ++i) mutated_call(call, before, rng);
    if (!cuda_available()) device_call(call, before, rng);
    runtime_options_call(rng);
  }

  void report() const {
    std::cout << fmt::format("C API fuzz: seed {}, {} cases\n{:<30} {:>7} {:>9} {:>8} {:>7}  statuses\n", config_.seed,
                             cases_run, "area", "tried", "expected", "failures", "skipped");
    for (const auto& [area, c] : counts_) {
      std::string statuses;
      for (const auto& [s, n] : c.statuses) statuses += fmt::format("{} {}; ", s, n);
      std::cout << fmt::format("{:<30} {:>7} {:>9} {:>8} {:>7}  {}\n", area, c.tried, c.as_expected, c.failures, c.skipped,
                               statuses);
    }
  }

  std::int64_t cases_run = 0;

 private:
  void fail(Count& c, const std::string& area, const std::string& why) {
    ++c.failures;
    if (++failures_reported_ <= 30) ADD_FAILURE() << area << ": " << why << "\n  " << context_;
  }

  void record(const std::string& area, flashgen_status status, const std::string& why) {
    Count& c = counts_[area];
    ++c.tried;
    ++c.statuses[flashgen_status_string(status)];
    if (why.empty())
      ++c.as_expected;
    else
      fail(c, area, why);
  }

  void valid_calls(FuzzCall& call, std::mt19937_64& rng) {
    if (rng() % 8 == 0) {  // lse is optional in forward
      call.poison_outputs({&call.o, &call.lse});
      flashgen_forward_args args = call.forward();
      args.lse.data = nullptr;
      const flashgen_status s = flashgen_forward(runtime_, &args, nullptr);
      record("valid forward (no lse)", s, succeeded(s, [&] { return check_forward(call, false); }));
    }
    call.poison_outputs({&call.o, &call.lse});
    const flashgen_forward_args fwd = call.forward();
    flashgen_status s = flashgen_forward(runtime_, &fwd, nullptr);
    record("valid forward", s, succeeded(s, [&] { return check_forward(call, true); }));
    if (s != FLASHGEN_OK) return;
    s = flashgen_prepare(runtime_, &fwd, 1 + static_cast<unsigned>(rng() % 3));  // CPU tensors: nothing to compile
    record("valid prepare", s, succeeded(s, [] { return std::string(); }));

    const flashgen_backward_args bwd = call.backward();
    std::size_t bytes = 12345;
    s = flashgen_backward_workspace_bytes(runtime_, &bwd, &bytes);
    record("valid backward_workspace_bytes", s,
           succeeded(s, [&] { return bytes == 0 ? "" : fmt::format("{} bytes for CPU tensors, expected 0", bytes); }));

    call.poison_outputs({&call.dq, &call.dk, &call.dv});
    const auto before = call.snapshot();
    s = flashgen_backward(runtime_, &bwd, nullptr);
    record("valid backward", s, succeeded(s, [&] {
             if (!call.unchanged_since(before, {&call.dq, &call.dk, &call.dv})) return std::string("an input changed");
             return check_backward(call);
           }));
    if (s != FLASHGEN_OK || !bwd.options.deterministic) return;
    const auto first = call.snapshot();
    call.poison_outputs({&call.dq, &call.dk, &call.dv});
    s = flashgen_backward(runtime_, &bwd, nullptr);
    record("valid backward (deterministic rerun)", s, succeeded(s, [&] {
             return call.unchanged_since(first) ? "" : "gradients differ bitwise from the first run";
           }));
  }

  template <typename Check>
  std::string succeeded(flashgen_status s, Check&& check) {
    if (s != FLASHGEN_OK) return fmt::format("status {}: {}", flashgen_status_string(s), flashgen_last_error());
    if (*flashgen_last_error() != '\0') return fmt::format("ok with a last error: {}", flashgen_last_error());
    return check();
  }

  // How a refused call must look; empty when it does.
  static std::string refused(flashgen_status s, const Expected& e, const FuzzCall& call,
                             const std::vector<std::vector<unsigned char>>& before) {
    const std::string message = flashgen_last_error();
    std::string why;
    if (s == FLASHGEN_OK) return "accepted (status ok)";
    if (std::find(e.statuses.begin(), e.statuses.end(), s) == e.statuses.end())
      why = fmt::format("status {}", flashgen_status_string(s));
    const bool named = std::any_of(e.prefixes.begin(), e.prefixes.end(), [&](const std::string& p) { return message.starts_with(p); });
    if (!named || message.find(e.contains) == std::string::npos)
      why += fmt::format("{}message '{}', expected one starting with '{}' containing '{}'", why.empty() ? "" : ", ", message,
                         fmt::join(e.prefixes, "' or '"), e.contains);
    if (!call.unchanged_since(before)) why += fmt::format("{}a refused call changed memory", why.empty() ? "" : ", ");
    return why;
  }

  void mutated_call(FuzzCall& call, const std::vector<std::vector<unsigned char>>& before, std::mt19937_64& rng) {
    const std::vector<Mutation>& table = mutations();
    const Mutation& m = table[rng() % table.size()];
    const bool backward = (m.passes & kBackwardPass) && (!(m.passes & kForwardPass) || rng() % 2 == 0);
    const std::string area = fmt::format("{} ({})", m.name, backward ? "backward" : "forward");
    flashgen_forward_args fwd = call.forward();
    flashgen_backward_args bwd = call.backward();
    Target t;
    if (backward)
      t = {call.slots(bwd), &bwd.options, &bwd.workspace, &bwd.workspace_bytes};
    else
      t = {call.slots(fwd), &fwd.options};
    const std::optional<Expected> e = m.apply(t, rng);
    if (!e) {
      ++counts_[area].skipped;
      return;
    }
    if (!backward) {
      flashgen_status s = flashgen_forward(runtime_, &fwd, nullptr);
      record(area, s, refused(s, *e, call, before));
      s = flashgen_prepare(runtime_, &fwd, FLASHGEN_PASS_FORWARD | FLASHGEN_PASS_BACKWARD);
      record(fmt::format("{} (prepare)", m.name), s, refused(s, *e, call, before));
      return;
    }
    flashgen_status s = flashgen_backward(runtime_, &bwd, nullptr);
    record(area, s, refused(s, *e, call, before));
    std::size_t bytes = 12345;
    s = flashgen_backward_workspace_bytes(runtime_, &bwd, &bytes);
    std::string why = refused(s, *e, call, before);
    if (bytes != 0) why += fmt::format("{}bytes is {} after a refusal, expected 0", why.empty() ? "" : ", ", bytes);
    record(fmt::format("{} (backward_workspace_bytes)", m.name), s, why);
  }

  // The valid call with every tensor on a CUDA ordinal: the GPU limits refuse it
  // (unsupported) or, where they hold, there is no device. The host buffers must not be touched.
  void device_call(FuzzCall& call, const std::vector<std::vector<unsigned char>>& before, std::mt19937_64& rng) {
    const std::int32_t device = static_cast<std::int32_t>(rng() % 4);
    flashgen_forward_args fwd = call.forward();
    flashgen_backward_args bwd = call.backward();
    for (const Slot& s : call.slots(fwd)) s.tensor->device = device;
    for (const Slot& s : call.slots(bwd)) s.tensor->device = device;
    Expected e{argument_names(), "", {FLASHGEN_ERROR_UNSUPPORTED, FLASHGEN_ERROR_NO_DEVICE}};
    e.prefixes.push_back("");  // no_device messages name the driver or the GPU, not an argument
    auto check = [&](flashgen_status s) {
      std::string why = refused(s, e, call, before);
      if (why.empty() && *flashgen_last_error() == '\0') why = "empty message";
      return why;
    };
    every_entry("device tensors, no GPU", fwd, bwd, check);
  }

  // forward, backward and backward_workspace_bytes on one argument set, each its own area.
  template <typename Check>
  void every_entry(const std::string& area, const flashgen_forward_args& fwd, const flashgen_backward_args& bwd,
                   Check&& check) {
    flashgen_status s = flashgen_forward(runtime_, &fwd, nullptr);
    record(area + " (forward)", s, check(s));
    s = flashgen_prepare(runtime_, &fwd, FLASHGEN_PASS_FORWARD | FLASHGEN_PASS_BACKWARD);
    record(area + " (prepare)", s, check(s));
    s = flashgen_backward(runtime_, &bwd, nullptr);
    record(area + " (backward)", s, check(s));
    std::size_t bytes = 0;
    s = flashgen_backward_workspace_bytes(runtime_, &bwd, &bytes);
    record(area + " (workspace_bytes)", s, check(s));
  }

  // Runtime options out of range, and whole argument structs of garbage bytes.
  void runtime_options_call(std::mt19937_64& rng) {
    flashgen_runtime_options options;
    flashgen_runtime_options_init(&options);
    const bool autotune = rng() % 2 == 0;
    constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
    const std::int32_t bad_autotune[] = {-1, 4, 5, 100, kMin, kMax}, bad_threads[] = {-1, -2, -1000, kMin};
    if (autotune)
      options.autotune = bad_autotune[rng() % 6];
    else
      options.cpu_threads = bad_threads[rng() % 4];
    flashgen_runtime* out = reinterpret_cast<flashgen_runtime*>(&options);
    const flashgen_status s = flashgen_runtime_create(&options, &out);
    std::string why = s == FLASHGEN_ERROR_INVALID_ARGUMENT ? "" : fmt::format("status {}", flashgen_status_string(s));
    if (!std::string(flashgen_last_error()).starts_with(autotune ? "options.autotune: is " : "options.cpu_threads: is "))
      why += fmt::format(" message '{}'", flashgen_last_error());
    if (out != nullptr) why += " *out is not null";
    if (s == FLASHGEN_OK) flashgen_runtime_destroy(out);
    record("runtime options out of range", s, why);

    const int pattern = static_cast<int>(rng() % 300);  // 0..255: that byte everywhere; above: random bytes
    auto fill = [&](auto& args) {
      auto* bytes = reinterpret_cast<unsigned char*>(&args);
      for (std::size_t i = 0; i < sizeof args; ++i) bytes[i] = static_cast<unsigned char>(pattern < 256 ? pattern : rng());
    };
    flashgen_forward_args fwd;
    flashgen_backward_args bwd;
    fill(fwd);
    fill(bwd);
    auto named = [](flashgen_status s) {
      const std::string m = flashgen_last_error();
      const auto& names = argument_names();
      const bool ok = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return m.starts_with(n); });
      return s == FLASHGEN_ERROR_INVALID_ARGUMENT && ok ? "" : fmt::format("status {} message '{}'", flashgen_status_string(s), m);
    };
    every_entry("garbage args", fwd, bwd, named);
  }

  Config config_;
  flashgen_runtime* runtime_ = nullptr;
  std::map<std::string, Count> counts_;
  std::string context_;
  int failures_reported_ = 0;
};

TEST(CApiFuzz, ValidAndAdversarialCalls) {
  const Config config = config_from_env();
  Fuzzer fuzzer(config);
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < config.cases; ++i) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (config.seconds > 0 && elapsed.count() > config.seconds) {
      std::cout << fmt::format("C API fuzz: time bound of {} s reached after {} cases\n", config.seconds, i);
      break;
    }
    fuzzer.run_case(i);
    ++fuzzer.cases_run;
  }
  fuzzer.report();
  std::cout << fmt::format("C API fuzz: {:.1f} s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (::testing::Test::HasFailure())
    std::cerr << "reproduce with FLASHGEN_FUZZ_SEED=" << config.seed << " (cases as printed)\n";
}

}  // namespace
}  // namespace flashgen::test::fuzz
