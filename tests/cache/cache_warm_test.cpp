// `flashgen cache warm` run as a process: it stores exactly the kernels the selector names
// for the set, a second run compiles nothing, failures and bad options are named; and the
// warmed directory, made read-only, serves every kernel from disk without a write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "compiler/kernel_selection.h"
#include "compiler/tuning_candidates.h"
#include "runtime/autotune_db.h"
#include "runtime/cache_directory.h"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cache/cache_test_support.h"
#include "tests/cache/cli_run.h"
#include "tests/cache/tiny_cache.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::CliRun;
using testing_support::flashgen;
using testing_support::LogCapture;
using testing_support::run_without_write_access;
using testing_support::ScopedEnv;
using testing_support::ScratchDir;
namespace fs = std::filesystem;

constexpr int kWarmTimeout = 600;  // NVRTC on a loaded CI machine
const std::vector<long long> kDefaultSeqlens = {1024, 4096, 16384};

// The small set: d64 bf16, sm_80 and sm_90a, causal both, forward and backward.
std::string small_set(const fs::path& dir) {
  return fmt::format("cache warm --head-dims 64 --dtypes bf16 --archs sm_80,sm_90a --causal both --passes fwd,bwd "
                     "--cache-dir '{}'",
                     dir.string());
}

// Appends the specs `out` does not hold yet.
void add_each(std::vector<KernelSpec>& out, const std::vector<KernelSpec>& specs) {
  for (const KernelSpec& s : specs)
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

// What the selector names for the small set, distinct (found here, not by the command).
std::vector<KernelSpec> small_set_kernels() {
  std::vector<KernelSpec> out;
  for (Arch arch : {Arch::sm_80, Arch::sm_90a})
    for (bool causal : {false, true})
      for (long long n : kDefaultSeqlens) {
        ProblemKey p;
        p.head_dim = 64;
        p.dtype = DType::bf16;
        p.causal = causal;
        p.seqlen_q = p.seqlen_k = n;
        add_each(out, select_forward_kernels(p, arch));
        add_each(out, select_backward_kernels(p, arch));
      }
  return out;
}

std::set<std::string> entry_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const EntryInfo& e : CacheDirectory(dir).list()) {
    EXPECT_EQ(e.state, EntryState::valid) << e.name << ": " << e.problem;
    names.insert(e.name);
  }
  return names;
}

std::set<std::string> names_of(const std::vector<KernelSpec>& specs, const fs::path& dir) {
  KernelCacheOptions options;
  options.dir = dir;
  options.log = [](LogLevel, const std::string&) {};
  const KernelCache cache(options);
  std::set<std::string> names;
  for (const KernelSpec& s : specs) names.insert(cache.entry_name(s));
  return names;
}

// Every path below `dir` this process can see, with its size.
std::set<std::string> tree(const fs::path& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it) {
    std::error_code ec;
    const auto bytes = it->is_regular_file(ec) ? it->file_size(ec) : 0;
    out.insert(fmt::format("{} {}", fs::relative(it->path(), dir).string(), bytes));
  }
  return out;
}

long count_lines(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
}

TEST(CacheWarm, StoresExactlyTheKernelsTheSelectorNamesAndASecondRunCompilesNothing) {
  ScratchDir dir;
  const std::vector<KernelSpec> expected = small_set_kernels();
  ASSERT_GE(expected.size(), 8u);

  const CliRun first = flashgen("", small_set(dir.path()), kWarmTimeout);
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_EQ(entry_names(dir.path()), names_of(expected, dir.path()));
  EXPECT_THAT(first.output, HasSubstr(fmt::format("kernels          {} (for sm_80, sm_90a", expected.size())));
  EXPECT_THAT(first.output, HasSubstr("already cached   0\n"));
  EXPECT_THAT(first.output, HasSubstr(fmt::format("compiled         {} (", expected.size())));
  EXPECT_THAT(first.output, HasSubstr("failed           0\n"));
  EXPECT_THAT(first.output, HasSubstr("cache directory  " + dir.path().string()));
  // Not a terminal: one progress line per kernel.
  EXPECT_EQ(count_lines(first.output, fmt::format(R"(\[\d+/{}\] compiled \w+ \(\d+ ms\)\n)", expected.size())),
            static_cast<long>(expected.size()))
      << first.output;
  EXPECT_THAT(first.output, Not(HasSubstr("\r")));

  const std::set<std::string> before = tree(dir.path());
  const CliRun second = flashgen("", small_set(dir.path()), kWarmTimeout);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr(fmt::format("already cached   {}\n", expected.size())));
  EXPECT_THAT(second.output, HasSubstr("compiled         0 ("));
  EXPECT_EQ(count_lines(second.output, R"(\] cached \w+\n)"), static_cast<long>(expected.size())) << second.output;
  EXPECT_EQ(tree(dir.path()), before) << "a run with everything cached wrote to the directory";
}

TEST(CacheWarm, AReadOnlyWarmedDirectoryServesEveryKernelFromDiskAndWritesNothing) {
  ScratchDir dir;
  const std::vector<KernelSpec> warmed = small_set_kernels();
  const CliRun warm = flashgen("", small_set(dir.path()), kWarmTimeout);
  ASSERT_EQ(warm.status, 0) << warm.output;
  const std::set<std::string> before = tree(dir.path());

  KernelSpec missing = warmed.front();
  missing.head_dim = 128;  // not warmed: compiled in memory
  const int code = run_without_write_access(dir.path(), [&] {
    int failures = 0;
    const auto check = [&](bool ok, const std::string& what) {
      if (!ok) std::fprintf(stderr, "read-only warmed directory: %s\n", what.c_str()), ++failures;
    };
    try {
      ScopedEnv env("FLASHGEN_CACHE_DIR", dir.path().string());  // as a container sets it
      LogCapture log;
      KernelCacheOptions options;
      options.log = log.sink();
      KernelCache cache(options);
      check(cache.dir() == dir.path(), "the cache must be FLASHGEN_CACHE_DIR");
      for (const CompiledKernel* k : cache.get_many(warmed))
        check(k->from_disk_cache, k->spec.uri() + " was not a disk hit");
      const CacheStats stats = cache.stats();
      check(stats.disk_hits == static_cast<long>(warmed.size()),
            fmt::format("{} disk hits, expected {}", stats.disk_hits, warmed.size()));
      check(stats.compiles == 0, fmt::format("{} compiles of warmed kernels, expected none", stats.compiles));
      check(log.warnings().empty(), "serving warmed kernels must log no warning");

      check(!cache.get(missing).cubin.empty(), "a kernel missing from the directory must compile in memory");
      check(cache.stats().compiles == 1, "one compile expected for the missing kernel");
      check(!cache.stats().disk_writable, "the directory must be reported unwritable");
      const std::vector<std::string> warnings = log.warnings();
      check(warnings.size() == 1, fmt::format("{} warnings, expected one", warnings.size()));
      if (!warnings.empty()) {
        check(warnings[0].find(dir.path().string()) != std::string::npos, "the warning must name the directory");
        check(warnings[0].find("compiled in memory") != std::string::npos, "the warning must say what happens");
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "read-only warmed directory threw: %s\n", e.what());
      return 1;
    }
    return failures == 0 ? 0 : 1;
  });
  if (code == 77) GTEST_SKIP() << "cannot switch to user nobody to take write access away from root";
  EXPECT_EQ(code, 0) << "see the scenario's messages on stderr";
  EXPECT_EQ(tree(dir.path()), before) << "the read-only directory changed";
}

TEST(CacheWarm, FailedCompilesExitNonZeroNamingEachKernel) {
  ScratchDir dir;
  const CliRun r = flashgen("FLASHGEN_NVRTC_FLAGS=--no-such-nvrtc-option",
                            fmt::format("cache warm --head-dims 64 --dtypes bf16 --archs sm_80,sm_90a --causal off "
                                        "--passes fwd --cache-dir '{}'",
                                        dir.path().string()),
                            kWarmTimeout);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("failed           2\n"));
  EXPECT_THAT(r.output, HasSubstr("compile error: cache warm: 2 of 2 kernels failed:"));
  ProblemKey p;
  p.head_dim = 64;
  for (Arch arch : {Arch::sm_80, Arch::sm_90a}) {
    const std::string uri = select_forward_kernels(p, arch).front().uri();
    EXPECT_THAT(r.output, HasSubstr(fmt::format("  {}: NVRTC failed: ", uri)));
    EXPECT_THAT(r.output, HasSubstr(fmt::format("] FAILED {}: ", uri)));
  }
  EXPECT_THAT(r.output, HasSubstr("--no-such-nvrtc-option"));
  EXPECT_TRUE(CacheDirectory(dir.path()).list().empty());
}

TEST(CacheWarm, BadOptionsFailNamingTheOptionBeforeAnyWrite) {
  ScratchDir scratch;
  const fs::path dir = scratch.path() / "cache";
  const std::string base = fmt::format("cache warm --cache-dir '{}' --head-dims 64 --dtypes bf16", dir.string());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--archs sm_70", "--archs: got 'sm_70', expected one of sm_80, sm_86, sm_89, sm_90a"},
      {"--archs sm_90", "--archs: got 'sm_90', expected one of"},
      {"--archs ''", "--archs: is empty, expected"},
      {"--head-dims 300", "--head-dims: got 300, expected"},
      {"--head-dims 0", "--head-dims: got 0, expected"},
      {"--head-dims ''", "--head-dims: is empty, expected"},
      {"--dtypes ''", "--dtypes: is empty, expected"},
      {"--dtypes fp32", "--dtypes: got 'fp32', expected bf16 or fp16"},
      {"--passes ''", "--passes: is empty, expected"},
      {"--passes fwd,all", "--passes: all not in {fwd,bwd}"},
      {"--seqlens 4q", "--seqlens: got '4q', expected a positive length"},
      {"--causal sometimes", "--causal: sometimes not in {on,off,both}"},
      {"--window maybe", "--window: got 'maybe', expected on, off or both"},
      {"--deterministic yes", "--deterministic: got 'yes', expected on, off or both"},
      {"--varlen packed", "--varlen: got 'packed', expected on, off or both"},
      {"--kv-cache ring", "--kv-cache: got 'ring', expected none, contiguous or paged"},
      {"--threads -2", "--threads: got -2, expected a count >= 1 (0: one per core)"},
      {"--device 'NVIDIA H200'", "--device: 'NVIDIA H200' needs the autotune winners, autotune.json in"},
      {"--package '" + dir.string() + "'", "--package: given with --cache-dir, expected one of them"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = flashgen("", base + " " + args);
    EXPECT_NE(r.status, 0) << args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << args;
    EXPECT_FALSE(fs::exists(dir)) << args << ": the directory was created before the options were checked";
  }
  const CliRun disabled = flashgen("FLASHGEN_DISABLE_DISK_CACHE=1", base);
  EXPECT_EQ(disabled.status, 1) << disabled.output;
  EXPECT_THAT(disabled.output, HasSubstr("FLASHGEN_DISABLE_DISK_CACHE is set: cache warm would write nothing"));
  const CliRun not_a_dir = flashgen("", "cache warm --cache-dir /dev/null/cache --head-dims 64");
  EXPECT_EQ(not_a_dir.status, 1) << not_a_dir.output;
  EXPECT_THAT(not_a_dir.output, HasSubstr("--cache-dir: cannot warm /dev/null/cache: "));
}

// A cache given the package `pkg` serves every one of `specs` with no NVRTC to be found
// (FLASHGEN_NVRTC names a missing file: ctest runs each test in a process of its own, which
// has loaded no NVRTC before), writes nothing of its own, and fails clearly on a kernel the
// package lacks.
void expect_served_without_nvrtc(const fs::path& scratch, const fs::path& pkg, const std::vector<KernelSpec>& specs) {
  ScopedEnv no_nvrtc("FLASHGEN_NVRTC", (scratch / "no-libnvrtc.so").string());
  KernelCacheOptions options;
  options.dir = scratch / "mine";
  options.packaged_kernels = pkg;
  LogCapture log;
  options.log = log.sink();
  KernelCache cache(options);
  for (const CompiledKernel* k : cache.get_many(specs)) EXPECT_TRUE(k->from_disk_cache) << k->spec.uri();
  EXPECT_EQ(cache.stats().packaged_hits, static_cast<long>(specs.size()));
  EXPECT_EQ(cache.stats().compiles, 0);
  EXPECT_TRUE(log.warnings().empty());
  EXPECT_FALSE(fs::exists(scratch / "mine")) << "serving packaged kernels writes nothing";
  // The kernel the package lacks needs NVRTC, which is not there: a clear error, not a hang.
  KernelSpec absent = specs.front();
  absent.head_dim = specs.front().head_dim == 96 ? 80 : 96;
  EXPECT_THROW(cache.get(absent), Error);
}

// Warms the package `scratch`/pkg with each of `parts` (`cache warm` options after --package),
// as the wheel's set is built, then expects it to serve every one of `specs` with no NVRTC.
// One part: it compiled exactly `specs`.
void expect_set_serves(const fs::path& scratch, const std::vector<std::string>& parts,
                       const std::vector<KernelSpec>& specs) {
  const fs::path pkg = scratch / "pkg";
  for (const std::string& part : parts) {
    const CliRun warm = flashgen("", fmt::format("cache warm --package '{}' {}", pkg.string(), part), kWarmTimeout);
    ASSERT_EQ(warm.status, 0) << part << "\n" << warm.output;
    if (parts.size() == 1) {
      EXPECT_THAT(warm.output, HasSubstr(fmt::format("compiled         {} (", specs.size())));
    }
  }
  expect_served_without_nvrtc(scratch, pkg, specs);
}

// A package's kernel set: `--package DIR` warms DIR/nvrtc-<release>, and a cache given DIR
// serves every kernel of it with no NVRTC.
TEST(CacheWarm, APackageSetServesItsKernelsWhereNoNvrtcCanBeLoaded) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg";
  std::vector<KernelSpec> specs;
  ProblemKey p;
  p.head_dim = 64;
  p.dtype = DType::bf16;
  p.seqlen_q = p.seqlen_k = 4096;
  for (const KernelSpec& s : select_forward_kernels(p, Arch::sm_90a)) specs.push_back(s);
  for (const KernelSpec& s : select_backward_kernels(p, Arch::sm_90a)) specs.push_back(s);

  const CliRun warm = flashgen("", fmt::format("cache warm --package '{}' --head-dims 64 --dtypes bf16 --archs sm_90a "
                                               "--causal off --passes fwd,bwd --seqlens 4k",
                                               pkg.string()),
                               kWarmTimeout);
  ASSERT_EQ(warm.status, 0) << warm.output;
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(pkg)) sets.push_back(e.path().filename().string());
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_THAT(sets[0], ::testing::MatchesRegex(R"(nvrtc-[0-9]+\.[0-9]+)"));
  EXPECT_THAT(warm.output, HasSubstr("cache directory  " + (pkg / sets[0]).string()));
  EXPECT_THAT(warm.output, HasSubstr(fmt::format("compiled         {} (", specs.size())));
  EXPECT_EQ(entry_names(pkg / sets[0]).size(), specs.size());

  expect_served_without_nvrtc(scratch.path(), pkg, specs);
}

// The wheel's set warms the forward with the non-deterministic variants and the deterministic
// backward apart (cmake/FlashgenPackagedKernels.cmake): a deterministic variant's forward is
// the other's kernel, so the two parts serve all of it.
TEST(CacheWarm, TheSetsDeterministicPartServesADeterministicVariantWithTheForwardOfTheOther) {
  ScratchDir scratch;
  ProblemKey p;
  p.head_dim = 64;
  p.dtype = DType::bf16;
  p.causal = true;
  p.deterministic = true;
  p.seqlen_q = p.seqlen_k = 4096;
  std::vector<KernelSpec> specs = select_forward_kernels(p, Arch::sm_90a);
  for (const KernelSpec& s : select_backward_kernels(p, Arch::sm_90a)) specs.push_back(s);
  const std::string set = "--head-dims 64 --dtypes bf16 --archs sm_90a --causal on --seqlens 4k ";
  expect_set_serves(scratch.path(), {set + "--passes fwd,bwd", set + "--deterministic on --passes bwd"}, specs);
}

// `--varlen on` warms the kernels of packed sequences (the wheel's set holds the common
// variants so): a packed call's forward and backward come from them, for long sequences and
// for batches of short ones (other tiles).
TEST(CacheWarm, VarlenWarmsTheKernelsOfPackedSequences) {
  ScratchDir scratch;
  std::vector<KernelSpec> specs;
  for (long long n : {1LL, 4096LL}) {
    ProblemKey p;
    p.head_dim = 64;
    p.dtype = DType::bf16;
    p.causal = true;
    p.varlen = true;
    p.seqlen_q = p.seqlen_k = n;  // as `--seqlens` declares them
    add_each(specs, select_forward_kernels(p, Arch::sm_90a));
    add_each(specs, select_backward_kernels(p, Arch::sm_90a));
  }
  for (const KernelSpec& s : specs) EXPECT_TRUE(s.varlen) << s.uri();
  expect_set_serves(scratch.path(),
                    {"--head-dims 64 --dtypes bf16 --archs sm_90a --causal on --varlen on --passes fwd,bwd "
                     "--seqlens 1,4k"},
                    specs);
}

// `--kv-cache`: the split-KV forward over a contiguous or paged cache, packed queries with
// `--varlen`; no backward (there is none over a KV cache).
TEST(CacheWarm, KvCacheWarmsTheSplitKvForwardAndNoBackward) {
  ScratchDir scratch;
  std::vector<KernelSpec> specs;
  for (bool paged : {false, true}) {
    ProblemKey p;
    p.head_dim = 128;
    p.dtype = DType::bf16;
    p.varlen = true;
    p.paged = paged;
    p.seqused_k = !paged;
    p.seqlen_q = p.seqlen_k = 1;
    ASSERT_FALSE(has_backward(p));
    add_each(specs, select_forward_kernels(p, Arch::sm_90a));
  }
  ASSERT_EQ(specs.front().pass, Pass::fwd_splitkv);
  expect_set_serves(scratch.path(),
                    {"--head-dims 128 --dtypes bf16 --archs sm_90a --causal off --varlen on "
                     "--kv-cache contiguous,paged --passes fwd,bwd --seqlens 1"},
                    specs);
}

TEST(CacheWarm, CompilesTheAutotuneWinnersOfTheDirectoryToo) {
  ScratchDir dir;
  TuningKey key;
  key.head_dim = 64;
  key.seqlen_bucket = 4096;
  key.arch = Arch::sm_90a;
  DeviceProfile gpu;
  gpu.identity.gpu_name = "NVIDIA H200";
  gpu.identity.sm_count = 132;
  gpu.identity.driver_version = 13000;
  gpu.identity.nvrtc_version = nvrtc_version();
  gpu.limits.max_shared_memory = 227 * 1024;
  gpu.arch = Arch::sm_90a;
  const CandidateSet set = tuning_candidates(key, gpu.limits);
  ASSERT_GE(set.candidates.size(), 2u);
  TunedEntry winner;
  winner.candidate_set = set.hash;
  winner.kernels = set.candidates[1];  // not the heuristic's
  TuningDb(dir.path(), nullptr).store(gpu, {{key, winner}});

  const CliRun r = flashgen("", fmt::format("cache warm --head-dims 64 --dtypes bf16 --archs sm_90a --causal off "
                                            "--passes fwd --seqlens 4k --cache-dir '{}'",
                                            dir.path().string()),
                            kWarmTimeout);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(entry_names(dir.path()), names_of({set.candidates[0][0], set.candidates[1][0]}, dir.path()));

  const CliRun unknown = flashgen("", fmt::format("cache warm --head-dims 64 --dtypes bf16 --archs sm_90a --causal off "
                                                  "--passes fwd --device 'NVIDIA A100' --cache-dir '{}'",
                                                  dir.path().string()));
  EXPECT_EQ(unknown.status, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("--device"));
}

}  // namespace
}  // namespace flashgen
