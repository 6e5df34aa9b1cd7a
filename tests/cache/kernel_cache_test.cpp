// KernelCache in one process: memory and disk hits, integrity, keys, get_many, dumps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/cache_directory.h"
#include "runtime/cuda_device.h"
#include "runtime/environment.h"
#include "runtime/kernel_cache.h"
#include "tests/cache/cache_test_support.h"
#include "tests/cache/tiny_cache.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::read_bytes;
using testing_support::ScopedEnv;
using testing_support::LogCapture;
using testing_support::ScratchDir;
using testing_support::tiny_cache;
using testing_support::tiny_kernel;
using testing_support::write_bytes;
namespace fs = std::filesystem;



// A random legal spec (tile fields do not matter to the tiny kernel, only to its name and body)
// for which `accept` holds.
template <class Accept>
KernelSpec random_spec(unsigned& seed, const Accept& accept) {
  seed = flashgen::test::test_seed();
  std::mt19937 g(seed);
  for (;;) {  // redraw until legal (e.g. the shared memory of large tiles exceeds sm_86's limit)
    KernelSpec s;
    s.head_dim = std::uniform_int_distribution<int>(2, 16)(g) * 16;
    s.block_m = 64;
    s.block_n = std::uniform_int_distribution<int>(1, 4)(g) * 16;
    s.arch = kAllArchs[std::uniform_int_distribution<int>(0, 4)(g)];
    s.causal = g() & 1;
    if (s.problems().empty() && accept(s)) return s;
  }
}
KernelSpec random_spec(unsigned& seed) {
  return random_spec(seed, [](const KernelSpec&) { return true; });
}

// `s` but for block_n, for each other block_n legal on its arch.
std::vector<KernelSpec> other_block_ns(const KernelSpec& s) {
  std::vector<KernelSpec> others;
  for (int block_n : {16, 32, 48, 64}) {
    KernelSpec o = s;
    o.block_n = block_n;
    if (block_n != s.block_n && o.problems().empty()) others.push_back(o);
  }
  return others;
}

bool is_elf(const std::string& bytes) { return bytes.size() > 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(KernelCache, MissThenMemoryHitThenDiskHit) {
  ScratchDir dir;
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {} spec {}", seed, spec.uri()));

  auto first = tiny_cache(dir.path());
  const CompiledKernel& compiled = first->get(spec);
  EXPECT_FALSE(compiled.from_disk_cache);
  EXPECT_TRUE(is_elf(compiled.cubin));
  EXPECT_EQ(first->stats().compiles, 1);
  EXPECT_EQ(first->stats().memory_hits, 0);
  EXPECT_TRUE(first->stats().disk_writable);

  const CompiledKernel& again = first->get(spec);
  EXPECT_EQ(&again, &compiled);
  EXPECT_EQ(first->stats().memory_hits, 1);
  EXPECT_EQ(first->stats().compiles, 1);

  auto second = tiny_cache(dir.path());  // a new process would see the same: the disk entry
  const CompiledKernel& loaded = second->get(spec);
  EXPECT_TRUE(loaded.from_disk_cache);
  EXPECT_EQ(loaded.cubin, compiled.cubin);
  EXPECT_EQ(loaded.kernel_name, spec.uri());
  EXPECT_EQ(loaded.resources.registers, compiled.resources.registers);
  EXPECT_GT(loaded.resources.registers, 0);
  EXPECT_EQ(second->stats().disk_hits, 1);
  EXPECT_EQ(second->stats().compiles, 0);
}

TEST(KernelCache, EntryHoldsSourceCubinAndMeta) {
  ScratchDir dir;
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  auto cache = tiny_cache(dir.path());
  const CompiledKernel& k = cache->get(spec);

  const fs::path entry = cache->entry_dir(spec);
  const std::string key = cache->key(spec);
  ASSERT_EQ(key.size(), 32u);
  EXPECT_EQ(entry, dir.path() / fmt::format("{}-{}", spec.uri(), key.substr(0, 16)));
  EXPECT_EQ(read_bytes(entry / "kernel.cu"), tiny_kernel(spec).source);
  EXPECT_EQ(read_bytes(entry / "kernel.cubin"), k.cubin);

  const auto meta = nlohmann::json::parse(read_bytes(entry / "meta.json"));
  EXPECT_EQ(meta["key"], key);
  EXPECT_EQ(meta["uri"], spec.uri());
  EXPECT_EQ(meta["spec"]["head_dim"], spec.head_dim);
  EXPECT_EQ(meta["spec"]["arch"], to_string(spec.arch));
  EXPECT_EQ(meta["resources"]["registers"], k.resources.registers);
  EXPECT_EQ(meta["nvrtc_version"], nvrtc_version());
  EXPECT_EQ(meta["flashgen_version"], version());
  EXPECT_EQ(meta["cubin_bytes"], k.cubin.size());
  EXPECT_EQ(meta["cubin_xxh3"], fmt::format("{:016x}", XXH3_64bits(k.cubin.data(), k.cubin.size())));
  EXPECT_GT(meta["compile_ms"].get<double>(), 0.0);
  // Nothing is left behind but the entry, its lock and the (empty) temp area.
  EXPECT_TRUE(fs::is_empty(dir.path() / ".tmp"));
}

// Damages the entry of `spec` with `damage`, then checks that a new cache recompiles
// (never loads the damaged bytes) and repairs the entry.
void expect_recompiled_after(const std::function<void(const fs::path&)>& damage) {
  ScratchDir dir;
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::string good;
  fs::path entry;
  {
    auto cache = tiny_cache(dir.path());
    good = cache->get(spec).cubin;
    entry = cache->entry_dir(spec);
  }
  damage(entry);

  LogCapture log;
  auto cache = tiny_cache(dir.path(), &log);
  const CompiledKernel& k = cache->get(spec);
  EXPECT_FALSE(k.from_disk_cache);
  EXPECT_EQ(k.cubin, good);
  EXPECT_EQ(cache->stats().corrupt_entries, 1);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_EQ(cache->stats().disk_hits, 0);
  EXPECT_EQ(log.warnings().size(), 1u);
  EXPECT_EQ(read_bytes(entry / "kernel.cubin"), good) << "the entry was not repaired";

  auto after = tiny_cache(dir.path());
  EXPECT_TRUE(after->get(spec).from_disk_cache);
  EXPECT_EQ(after->stats().corrupt_entries, 0);
}

TEST(KernelCache, FlippedCubinByteIsRecompiledNotLoaded) {
  expect_recompiled_after([](const fs::path& entry) {
    std::string cubin = read_bytes(entry / "kernel.cubin");
    cubin[cubin.size() / 2] ^= 0x5a;  // same size: only the checksum can tell
    write_bytes(entry / "kernel.cubin", cubin);
  });
}

TEST(KernelCache, TruncatedCubinIsRecompiled) {
  expect_recompiled_after([](const fs::path& entry) {
    const std::string cubin = read_bytes(entry / "kernel.cubin");
    write_bytes(entry / "kernel.cubin", cubin.substr(0, cubin.size() / 3));
  });
}

TEST(KernelCache, BrokenMetaIsRecompiled) {
  expect_recompiled_after([](const fs::path& entry) { write_bytes(entry / "meta.json", "{\"key\": 12"); });
}

TEST(KernelCache, MissingCubinIsRecompiled) {
  expect_recompiled_after([](const fs::path& entry) { fs::remove(entry / "kernel.cubin"); });
}

// A cache over `dir` that also searches the read-only directories `read_dirs`.
std::unique_ptr<KernelCache> layered_cache(const fs::path& dir, std::vector<fs::path> read_dirs,
                                           LogCapture* log = nullptr) {
  KernelCacheOptions options;
  options.dir = dir;
  options.read_dirs = std::move(read_dirs);
  options.generate = [](const KernelSpec& s) { return testing_support::tiny_kernel(s); };
  options.log = log ? log->sink() : [](LogLevel, const std::string&) {};
  return std::make_unique<KernelCache>(options);
}

TEST(KernelCache, ReadDirsServeWhatTheCacheDirLacksAndAreNeverWritten) {
  ScratchDir scratch;
  const fs::path warmed = scratch.path() / "warmed", other = scratch.path() / "other", mine = scratch.path() / "mine";
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  KernelSpec absent = spec;
  absent.block_n = spec.block_n == 16 ? 32 : 16;  // another kernel, in no read directory
  const std::string cubin = tiny_cache(warmed)->get(spec).cubin;
  const fs::path entry = tiny_cache(warmed)->entry_dir(spec);
  const auto written = fs::last_write_time(entry / "kernel.cubin");

  // A missing directory first (skipped), then the warmed one.
  auto cache = layered_cache(mine, {other, warmed});
  const CompiledKernel& k = cache->get(spec);
  EXPECT_TRUE(k.from_disk_cache);
  EXPECT_EQ(k.cubin, cubin);
  EXPECT_EQ(cache->stats().compiles, 0);
  EXPECT_EQ(cache->stats().disk_hits, 1);
  EXPECT_FALSE(fs::exists(cache->entry_dir(spec))) << "a read directory's kernel is not copied";
  // A kernel no directory holds is compiled into the cache directory, not into a read one.
  cache->get(absent);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_TRUE(fs::exists(cache->entry_dir(absent) / "kernel.cubin"));
  EXPECT_FALSE(fs::exists(warmed / cache->entry_dir(absent).filename()));
  EXPECT_EQ(fs::last_write_time(entry / "kernel.cubin"), written);
}

TEST(KernelCache, DamagedReadDirEntryIsSkippedNotRepaired) {
  ScratchDir scratch;
  const fs::path warmed = scratch.path() / "warmed", mine = scratch.path() / "mine";
  const KernelSpec spec;
  const std::string good = tiny_cache(warmed)->get(spec).cubin;
  const fs::path entry = tiny_cache(warmed)->entry_dir(spec);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x5a;
  write_bytes(entry / "kernel.cubin", bad);

  LogCapture log;
  auto cache = layered_cache(mine, {warmed}, &log);
  const CompiledKernel& k = cache->get(spec);
  EXPECT_FALSE(k.from_disk_cache);
  EXPECT_EQ(k.cubin, good);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_EQ(cache->stats().corrupt_entries, 1);
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_THAT(log.warnings()[0], HasSubstr("read-only kernel cache " + warmed.string()));
  EXPECT_EQ(read_bytes(entry / "kernel.cubin"), bad) << "a read directory is never written";
  EXPECT_TRUE(layered_cache(mine, {})->get(spec).from_disk_cache) << "compiled into the cache directory";
}

TEST(KernelCache, ReadDirWritableByOthersIsRefused) {
  ScratchDir scratch;
  const fs::path warmed = scratch.path() / "warmed", mine = scratch.path() / "mine";
  const KernelSpec spec;
  tiny_cache(warmed)->get(spec);
  fs::permissions(warmed, fs::perms::others_write, fs::perm_options::add);
  LogCapture log;
  auto cache = layered_cache(mine, {warmed}, &log);
  EXPECT_FALSE(cache->get(spec).from_disk_cache);
  EXPECT_EQ(cache->stats().compiles, 1);
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_THAT(log.warnings()[0], HasSubstr("refusing the read-only kernel cache directory " + warmed.string()));
}

TEST(KernelCache, ReadDirsComeFromTheEnvironment) {
  ScratchDir scratch;
  const fs::path warmed = scratch.path() / "warmed";
  const KernelSpec spec;
  tiny_cache(warmed)->get(spec);
  ScopedEnv dirs("FLASHGEN_CACHE_READ_DIRS", "::" + (scratch.path() / "none").string() + ":" + warmed.string() + ":");
  EXPECT_EQ(cache_read_dirs_from_env(), (std::vector<fs::path>{scratch.path() / "none", warmed}));
  auto cache = tiny_cache(scratch.path() / "mine");
  EXPECT_TRUE(cache->get(spec).from_disk_cache);
  EXPECT_EQ(cache->stats().compiles, 0);
}

// Puts the tiny kernel of `spec` into the package `pkg` as NVRTC `nvrtc`'s set holds it: under
// the key that release gives, its meta.json's log saying which set it is.
void package_kernel(const fs::path& pkg, NvrtcVersion nvrtc, const KernelSpec& spec) {
  ScratchDir scratch;
  auto cache = tiny_cache(scratch.path());
  cache->get(spec);
  const std::string key = cache->key(spec, nvrtc);
  const fs::path set = pkg / packaged_set_name(nvrtc);
  const fs::path entry = set / fmt::format("{}-{}", spec.uri(), key.substr(0, 16));
  fs::create_directories(set);
  fs::copy(cache->entry_dir(spec), entry);
  nlohmann::json meta = nlohmann::json::parse(read_bytes(entry / "meta.json"));
  meta["key"] = key;
  meta["nvrtc_version"] = nvrtc.str();
  meta["log"] = "packaged by " + nvrtc.str();
  fs::remove(entry / "meta.json");
  write_bytes(entry / "meta.json", meta.dump());
}

// A cache over `dir` whose package is `pkg` (empty: none).
std::unique_ptr<KernelCache> packaged_cache(const fs::path& dir, const fs::path& pkg, LogCapture* log = nullptr) {
  KernelCacheOptions options;
  options.dir = dir;
  options.read_dirs.emplace();
  options.packaged_kernels = pkg;
  options.generate = [](const KernelSpec& s) { return testing_support::tiny_kernel(s); };
  options.log = log ? log->sink() : [](LogLevel, const std::string&) {};
  return std::make_unique<KernelCache>(options);
}

TEST(NvrtcVersion, ParsesMajorDotMinorOnly) {
  EXPECT_EQ(NvrtcVersion::parse("13.0"), (NvrtcVersion{13, 0}));
  EXPECT_EQ(NvrtcVersion::parse("12.9"), (NvrtcVersion{12, 9}));
  EXPECT_EQ((NvrtcVersion{12, 10}).str(), "12.10");
  for (const char* bad : {"", "13", "13.", ".0", "13.0.1", "x13.0", "13.0x", "13,0", "-1.0", "13.-1"})
    EXPECT_EQ(NvrtcVersion::parse(bad), std::nullopt) << bad;
  EXPECT_LT((NvrtcVersion{12, 9}), (NvrtcVersion{13, 0}));
  EXPECT_EQ(packaged_set_name({13, 0}), "nvrtc-13.0");
}

TEST(KernelCache, APackagedSetServesItsKernelsByItsOwnReleasesKeyBeforeTheCacheDir) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg", mine = scratch.path() / "mine";
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {} spec {}", seed, spec.uri()));
  package_kernel(pkg, {12, 4}, spec);
  // Directories not named as a set are ignored, whatever they hold: here a newer release's set.
  for (const char* name : {"nvrtc-13.0.1", "nvrtc-013.0", "kernels"}) {
    package_kernel(scratch.path() / name, {13, 0}, spec);
    fs::rename(scratch.path() / name / "nvrtc-13.0", pkg / name);
  }
  ASSERT_NE(tiny_cache(mine)->key(spec, {12, 4}), tiny_cache(mine)->key(spec, {13, 0})) << "the release is in the key";

  LogCapture log;
  auto cache = packaged_cache(mine, pkg, &log);
  const CompiledKernel& k = cache->get(spec);
  EXPECT_TRUE(k.from_disk_cache);
  EXPECT_EQ(k.log, "packaged by 12.4");
  EXPECT_EQ(cache->stats().packaged_hits, 1);
  EXPECT_EQ(cache->stats().disk_hits, 1);
  EXPECT_EQ(cache->stats().compiles, 0);
  EXPECT_TRUE(log.warnings().empty()) << log.warnings().front();
  EXPECT_FALSE(fs::exists(mine / cache->entry_name(spec))) << "a packaged kernel is not copied";
  EXPECT_EQ(cache->get(spec).log, "packaged by 12.4");
  EXPECT_EQ(cache->stats().memory_hits, 1);

  // A kernel the package lacks compiles into the cache directory as ever.
  KernelSpec absent = spec;
  absent.block_n = spec.block_n == 16 ? 32 : 16;
  EXPECT_FALSE(cache->get(absent).from_disk_cache);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_TRUE(fs::exists(cache->entry_dir(absent) / "kernel.cubin"));
  EXPECT_EQ(std::distance(fs::directory_iterator(pkg / "nvrtc-12.4"), fs::directory_iterator()), 1)
      << "the package is never written";
}

// ready() answers without compiling: what the padded substitute (runtime/padded_substitute.h)
// asks before standing in for kernels that are still to compile.
TEST(KernelCache, ReadyFindsMemoryDiskAndPackageEntriesAndCompilesNothing) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg", mine = scratch.path() / "mine";
  unsigned seed;
  // Two more kernels, the same but for block_n (d256 on sm_86/89 may allow only one more).
  const KernelSpec packaged = random_spec(seed, [](const KernelSpec& s) { return other_block_ns(s).size() >= 2; });
  SCOPED_TRACE(fmt::format("seed {} spec {}", seed, packaged.uri()));
  const std::vector<KernelSpec> others = other_block_ns(packaged);
  const KernelSpec on_disk = others[0], nowhere = others[1];
  package_kernel(pkg, loaded_nvrtc_version(), packaged);
  packaged_cache(mine, {})->get(on_disk);

  auto cache = packaged_cache(mine, pkg);
  EXPECT_FALSE(cache->ready(std::vector{nowhere}));
  EXPECT_FALSE(cache->ready(std::vector{packaged, on_disk, nowhere})) << "one missing kernel: not ready";
  EXPECT_EQ(cache->stats().compiles, 0) << "ready() compiles nothing";
  EXPECT_TRUE(cache->ready(std::vector{packaged, on_disk}));
  EXPECT_EQ(cache->stats().packaged_hits, 1);
  EXPECT_EQ(cache->stats().disk_hits, 2);
  EXPECT_EQ(cache->stats().compiles, 0);
  EXPECT_FALSE(cache->ready(std::vector{nowhere})) << "still not compiled";
  EXPECT_FALSE(cache->get(nowhere).from_disk_cache);  // get() compiles it
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_TRUE(cache->ready(std::vector{nowhere}));
  EXPECT_EQ(cache->stats().disk_hits, 2) << "from memory now";
}

TEST(KernelCache, TheNewestPackagedSetTheDriverCanLoadWins) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg";
  const KernelSpec spec;
  package_kernel(pkg, {12, 4}, spec);
  package_kernel(pkg, {99, 0}, spec);  // a CUDA no driver supports yet
  auto cache = packaged_cache(scratch.path() / "mine", pkg);
  // Without a driver nothing is loaded, so nothing is ruled out: the newest set serves.
  EXPECT_EQ(cache->get(spec).log, cuda_available() ? "packaged by 12.4" : "packaged by 99.0");
  EXPECT_EQ(cache->stats().compiles, 0);
}

TEST(KernelCache, APackagedSetIsReadWithThePackagesTrustAndVerified) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg", mine = scratch.path() / "mine";
  const KernelSpec spec;
  package_kernel(pkg, {12, 4}, spec);
  // pip installs with the user's umask: 002 leaves the package group-writable.
  for (const auto& e : fs::recursive_directory_iterator(pkg))
    fs::permissions(e.path(), fs::perms::group_write, fs::perm_options::add);
  fs::permissions(pkg, fs::perms::group_write, fs::perm_options::add);
  EXPECT_EQ(packaged_cache(mine, pkg)->get(spec).log, "packaged by 12.4");

  // A damaged entry is skipped (said once), never repaired; the kernel compiles into `mine`.
  const fs::path entry = *fs::directory_iterator(pkg / "nvrtc-12.4");
  std::string cubin = read_bytes(entry / "kernel.cubin");
  cubin[cubin.size() / 2] ^= 0x5a;
  fs::remove(entry / "kernel.cubin");
  write_bytes(entry / "kernel.cubin", cubin);
  LogCapture log;
  auto cache = packaged_cache(mine, pkg, &log);
  EXPECT_FALSE(cache->get(spec).from_disk_cache);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_EQ(cache->stats().corrupt_entries, 1);
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_THAT(log.warnings()[0], HasSubstr("read-only kernel cache " + (pkg / "nvrtc-12.4").string()));
  EXPECT_EQ(read_bytes(entry / "kernel.cubin"), cubin);
}

TEST(KernelCache, ThePackageComesFromTheEnvironmentUnlessGivenOrSwitchedOff) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg";
  const KernelSpec spec;
  package_kernel(pkg, {12, 4}, spec);
  ScopedEnv env("FLASHGEN_PACKAGED_KERNELS", pkg.string());
  EXPECT_EQ(packaged_kernels_from_env(), pkg);
  EXPECT_TRUE(tiny_cache(scratch.path() / "a")->get(spec).from_disk_cache) << "nullopt: the environment's";
  auto none = packaged_cache(scratch.path() / "b", fs::path());
  EXPECT_FALSE(none->get(spec).from_disk_cache) << "empty: no package";
  ScopedEnv no_disk("FLASHGEN_DISABLE_DISK_CACHE", "1");
  auto memory_only = packaged_cache(scratch.path() / "c", pkg);
  EXPECT_FALSE(memory_only->get(spec).from_disk_cache) << "no disk at all: no package either";
}

TEST(KernelCache, KeyDependsOnSourceOptionsEnvironmentAndArch) {
  ScratchDir dir;
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  ScopedEnv no_flags("FLASHGEN_NVRTC_FLAGS", std::nullopt);
  const std::string base = tiny_cache(dir.path())->key(spec);

  EXPECT_EQ(tiny_cache(dir.path())->key(spec), base) << "the key must be deterministic";
  EXPECT_NE(tiny_cache(dir.path(), nullptr, /*salt=*/1)->key(spec), base) << "source change";
  KernelSpec other_arch = spec;
  other_arch.arch = spec.arch == Arch::sm_80 ? Arch::sm_90a : Arch::sm_80;
  EXPECT_NE(tiny_cache(dir.path())->key(other_arch), base) << "arch change";
  {
    ScopedEnv flags("FLASHGEN_NVRTC_FLAGS", "--maxrregcount=128");
    auto flagged = tiny_cache(dir.path());
    EXPECT_EQ(flagged->compile_options().extra_flags, std::vector<std::string>{"--maxrregcount=128"});
    EXPECT_NE(flagged->key(spec), base) << "cache-invalidating environment change";
  }
  {
    ScopedEnv neutral("FLASHGEN_LOG_LEVEL", "error");
    EXPECT_EQ(tiny_cache(dir.path())->key(spec), base) << "a cache-neutral variable changed the key";
  }
  ScratchDir elsewhere;
  EXPECT_EQ(tiny_cache(elsewhere.path())->key(spec), base) << "the key must not depend on the cache path";
}

TEST(KernelCache, DifferentEnvironmentFlagsGiveSeparateEntries) {
  ScratchDir dir;
  const KernelSpec spec;
  ScopedEnv no_flags("FLASHGEN_NVRTC_FLAGS", std::nullopt);
  auto plain = tiny_cache(dir.path());
  plain->get(spec);
  ScopedEnv flags("FLASHGEN_NVRTC_FLAGS", "-DSOMETHING=1");
  auto flagged = tiny_cache(dir.path());
  EXPECT_FALSE(flagged->get(spec).from_disk_cache);
  EXPECT_EQ(flagged->stats().compiles, 1);
  EXPECT_NE(plain->entry_dir(spec), flagged->entry_dir(spec));
}

TEST(KernelCache, GetManyCompilesMissingSpecsInParallelInOrder) {
  ScratchDir dir;
  std::vector<KernelSpec> specs(5);
  for (int i = 0; i < 5; ++i) {
    specs[i].head_dim = 32 * (i + 1);
    specs[i].arch = kAllArchs[i];
  }
  specs.push_back(specs[1]);  // a duplicate compiles once
  KernelCacheOptions options;
  options.dir = dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  options.log = [](LogLevel, const std::string&) {};
  options.compile_threads = 3;
  KernelCache cache(options);

  const auto kernels = cache.get_many(specs);
  ASSERT_EQ(kernels.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(kernels[i]->spec, specs[i]) << i;
    EXPECT_THAT(kernels[i]->log, HasSubstr(fmt::format("for '{}'", to_string(specs[i].arch)))) << i;
  }
  EXPECT_EQ(kernels[5], kernels[1]);
  EXPECT_EQ(cache.stats().compiles, 5);

  const auto again = cache.get_many(specs);
  EXPECT_EQ(again, kernels);
  EXPECT_EQ(cache.stats().compiles, 5);
  EXPECT_EQ(cache.stats().memory_hits, 1 + 6);  // the duplicate's first lookup, then all six
}

TEST(KernelCache, GetManyReportsEachSpecOnceWithItsKernelOrItsFailure) {
  ScratchDir dir;
  std::vector<KernelSpec> specs(4);
  for (int i = 0; i < 4; ++i) specs[i].head_dim = 32 * (i + 1);
  KernelCacheOptions options;
  options.dir = dir.path();
  // The third spec's source does not compile.
  options.generate = [bad = specs[2]](const KernelSpec& s) {
    return s == bad ? GeneratedSource{s.uri(), "extern \"C\" __global__ void oops( {"} : tiny_kernel(s);
  };
  options.log = [](LogLevel, const std::string&) {};
  options.compile_threads = 2;
  KernelCache cache(options);
  cache.get(specs[0]);  // a memory hit is reported too

  std::vector<KernelReady> reports;
  std::atomic<int> in_sink{0};
  bool overlapped = false;
  const KernelReadySink sink = [&](const KernelReady& r) {
    overlapped = overlapped || in_sink.fetch_add(1) != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reports.push_back(r);
    --in_sink;
  };
  try {
    cache.get_many(specs, sink);
    FAIL() << "get_many hid the failed compile";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), HasSubstr(specs[2].uri()));
  }
  EXPECT_FALSE(overlapped) << "the sink was called from two threads at a time";
  ASSERT_EQ(reports.size(), specs.size());
  std::sort(reports.begin(), reports.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(reports[i].index, i);
    EXPECT_EQ(reports[i].error != nullptr, i == 2) << i;
    EXPECT_EQ(reports[i].kernel == nullptr, i == 2) << i;
    if (reports[i].kernel) {
      EXPECT_EQ(reports[i].kernel->spec, specs[i]) << i;
    }
  }
  EXPECT_EQ(cache.stats().compiles, 3);
  EXPECT_EQ(cache.stats().memory_hits, 1);
}

// A cache's options: `dir`, `generate`, no log output, `threads` compile threads (0: the default).
KernelCacheOptions quiet_options(const fs::path& dir, SourceGenerator generate, int threads = 0) {
  KernelCacheOptions options;
  options.dir = dir;
  options.generate = std::move(generate);
  options.log = [](LogLevel, const std::string&) {};
  options.compile_threads = threads;
  return options;
}

// A generator of source NVRTC rejects, counting its calls.
template <class Counter>
SourceGenerator broken_source(Counter& calls) {
  return [&calls](const KernelSpec& s) {
    ++calls;
    return GeneratedSource{s.uri(), "extern \"C\" __global__ void oops( {"};
  };
}

// Waits until `done()` holds, at most a minute: a test that waits for the cache's threads
// fails instead of hanging when they never get there.
template <class Done>
[[nodiscard]] bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A generator that holds every background compile until the test opens the gate (or a minute
// passed: a failed test does not hang in the cache's destructor), so that the tests can tell
// "returned at once" from "returned after compiling". The test's own thread is never held:
// prefetch() generates a spec's source on the caller's thread to look its entry up (only
// compiles go to the cache's threads).
struct GatedGenerator {
  std::mutex mutex;
  std::condition_variable opened_cv;
  bool opened = false;
  std::atomic<int> calls{0};  // held generations (on the cache's threads)
  const std::thread::id test_thread = std::this_thread::get_id();
  void open() {
    {
      std::lock_guard lock(mutex);
      opened = true;
    }
    opened_cv.notify_all();
  }
  // Holds the compiles of the specs `held` picks (every spec by default).
  SourceGenerator generator(std::function<bool(const KernelSpec&)> held = {}) {
    return [this, held](const KernelSpec& s) {
      if ((held && !held(s)) || std::this_thread::get_id() == test_thread) return tiny_kernel(s);
      ++calls;
      std::unique_lock lock(mutex);
      opened_cv.wait_for(lock, std::chrono::seconds(60), [&] { return opened; });
      return tiny_kernel(s);
    };
  }
};

std::vector<KernelSpec> distinct_specs(int n) {
  std::vector<KernelSpec> specs(n);
  for (int i = 0; i < n; ++i) {
    specs[i].head_dim = 32 + 16 * i;
    specs[i].arch = kAllArchs[i % std::size(kAllArchs)];
  }
  return specs;
}

TEST(KernelCache, PrefetchReturnsAtOnceAndGetWaitsForTheBackgroundCompile) {
  ScratchDir dir;
  GatedGenerator gate;
  KernelCache cache(quiet_options(dir.path(), gate.generator(), 2));
  const std::vector<KernelSpec> specs = distinct_specs(4);

  cache.prefetch(specs);  // returns while every compile is held at the gate
  ASSERT_TRUE(eventually([&] { return gate.calls >= 2; })) << "both compile threads run one";
  EXPECT_EQ(cache.stats().compiles, 0);
  cache.prefetch(specs);  // queued or running already: nothing is queued twice
  gate.open();
  const auto kernels = cache.get_many(specs);
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(kernels[i]->spec, specs[i]) << i;
  EXPECT_EQ(cache.stats().compiles, 4) << "each kernel compiled once, by the background threads or get_many";
}

// A kernel already in memory is served (and loaded) at once while background compiles of
// others are held: prefetch never blocks the calls that do not need what it compiles.
TEST(KernelCache, ReadyKernelsAreServedWhileBackgroundCompilesRun) {
  ScratchDir dir;
  GatedGenerator gate;
  const std::vector<KernelSpec> specs = distinct_specs(3);
  KernelCache cache(quiet_options(dir.path(), gate.generator([&](const KernelSpec& s) { return !(s == specs[0]); }), 2));
  const CompiledKernel& ready = cache.get(specs[0]);
  cache.prefetch(std::span(specs).subspan(1));
  ASSERT_TRUE(eventually([&] { return gate.calls >= 2; })) << "both held compiles run at once";
  std::atomic<bool> served{false};
  std::thread user([&] {
    EXPECT_EQ(&cache.get(specs[0]), &ready);
    served = true;
  });
  EXPECT_TRUE(eventually([&] { return served.load(); })) << "a kernel in memory waited for unrelated background compiles";
  gate.open();
  user.join();
  for (const KernelSpec& s : specs) cache.get(s);
  EXPECT_EQ(cache.stats().compiles, 3);
}

TEST(KernelCache, PrefetchedKernelsAreMemoryHitsAndOnDisk) {
  ScratchDir dir;
  auto cache = tiny_cache(dir.path());
  const std::vector<KernelSpec> specs = distinct_specs(3);
  cache->prefetch(specs);
  for (const KernelSpec& s : specs) EXPECT_FALSE(cache->get(s).cubin.empty());  // waits where still compiling
  EXPECT_EQ(cache->stats().compiles, 3);
  cache->prefetch(specs);  // ready: nothing to do
  for (const KernelSpec& s : specs) cache->get(s);
  EXPECT_EQ(cache->stats().compiles, 3);
  auto fresh = tiny_cache(dir.path());
  for (const KernelSpec& s : specs) EXPECT_TRUE(fresh->get(s).from_disk_cache) << s.uri();
}

TEST(KernelCache, DestroyingTheCacheDropsQueuedPrefetches) {
  ScratchDir dir;
  GatedGenerator gate;
  auto cache = std::make_unique<KernelCache>(quiet_options(dir.path(), gate.generator(), 1));
  cache->prefetch(distinct_specs(6));
  ASSERT_TRUE(eventually([&] { return gate.calls >= 1; }));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();
  });
  cache.reset();  // waits for the one running compile, not for the five queued
  opener.join();
  EXPECT_EQ(gate.calls, 1);
}

TEST(KernelCache, PrefetchFailureIsReportedByTheGetThatNeedsIt) {
  ScratchDir dir;
  std::atomic<int> calls{0};
  KernelCache cache(quiet_options(dir.path(), broken_source(calls)));
  const KernelSpec spec;
  const KernelSpec specs[] = {spec};
  cache.prefetch(specs);  // fails in the background, silently
  ASSERT_TRUE(eventually([&] { return calls >= 1; }));
  EXPECT_THROW(cache.get(spec), Error);  // compiles again (after the background attempt) and throws
  EXPECT_GE(calls.load(), 2);
}

TEST(KernelCache, CompileErrorIsReportedAndRetried) {
  ScratchDir dir;
  int calls = 0;
  KernelCache cache(quiet_options(dir.path(), broken_source(calls)));
  const KernelSpec spec;
  try {
    cache.get(spec);
    FAIL() << "broken source compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), ::testing::StartsWith(spec.uri() + ": NVRTC failed:\n"));
  }
  EXPECT_THROW(cache.get(spec), Error);
  EXPECT_EQ(calls, 2) << "a failed compile must not be cached";
  for (const auto& item : fs::directory_iterator(dir.path()))
    EXPECT_EQ(item.path().filename().string()[0], '.') << "unexpected entry " << item.path();
}

TEST(KernelCache, InvalidSpecIsRejectedBeforeGenerating) {
  ScratchDir dir;
  bool generated = false;
  KernelCacheOptions options;
  options.dir = dir.path();
  options.generate = [&generated](const KernelSpec& s) {
    generated = true;
    return tiny_kernel(s);
  };
  KernelCache cache(options);
  KernelSpec bad;
  bad.head_dim = 257;
  try {
    cache.get(bad);
    FAIL() << "head_dim 257 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("head_dim"));
  }
  EXPECT_FALSE(generated);
}

TEST(KernelCache, DisabledDiskCacheTouchesNoFiles) {
  ScratchDir dir;
  const fs::path cache_dir = dir.path() / "cache";
  ScopedEnv disabled("FLASHGEN_DISABLE_DISK_CACHE", "1");
  auto cache = tiny_cache(cache_dir);
  const KernelSpec spec;
  EXPECT_TRUE(is_elf(cache->get(spec).cubin));
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_FALSE(cache->stats().disk_writable);
  EXPECT_FALSE(fs::exists(cache_dir));
}

TEST(KernelCache, DumpDirReceivesEveryStage) {
  ScratchDir cache_dir, dump_dir;
  ScopedEnv dump("FLASHGEN_DUMP_DIR", dump_dir.path().string());
  unsigned seed;
  const KernelSpec spec = random_spec(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  auto cache = tiny_cache(cache_dir.path());
  const CompiledKernel& k = cache->get(spec);

  const fs::path d = dump_dir.path() / cache->entry_name(spec);
  EXPECT_EQ(read_bytes(d / "kernel.cu"), k.source);
  EXPECT_THAT(read_bytes(d / "kernel.ptx"), HasSubstr(".entry " + spec.uri()));
  EXPECT_EQ(read_bytes(d / "kernel.cubin"), k.cubin);
  EXPECT_THAT(read_bytes(d / "compile.log"), HasSubstr("Used "));
  const auto resources = nlohmann::json::parse(read_bytes(d / "resources.json"));
  EXPECT_EQ(resources["resources"]["registers"], k.resources.registers);
  EXPECT_EQ(resources["spec"]["uri"], spec.uri());
  EXPECT_EQ(resources["nvrtc_options"][0], fmt::format("--gpu-architecture={}", to_string(spec.arch)));

  // A disk hit compiles nothing, so it dumps nothing new.
  fs::remove_all(d);
  auto second = tiny_cache(cache_dir.path());
  EXPECT_TRUE(second->get(spec).from_disk_cache);
  EXPECT_FALSE(fs::exists(d));
}

TEST(KernelCache, ConcurrentGetsOfOneSpecCompileOnce) {
  ScratchDir dir;
  auto cache = tiny_cache(dir.path());
  const KernelSpec spec;
  std::vector<const CompiledKernel*> seen(6);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) threads.emplace_back([&, t] { seen[t] = &cache->get(spec); });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 6; ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(cache->stats().compiles, 1);
  EXPECT_EQ(cache->stats().memory_hits, 5);
}

TEST(CacheDirectory, ListsEntriesAndClearRemovesOnlyThem) {
  ScratchDir dir;
  KernelSpec a, b;
  b.head_dim = 64;
  auto cache = tiny_cache(dir.path());
  cache->get(a);
  cache->get(b);
  // Damage b; leave a foreign directory and file that `clear` must not touch.
  const fs::path b_cubin = cache->entry_dir(b) / "kernel.cubin";
  write_bytes(b_cubin, read_bytes(b_cubin) + "x");
  fs::create_directories(dir.path() / "my-notes");
  write_bytes(dir.path() / "README", "mine");

  const CacheDirectory disk(dir.path());
  const auto entries = disk.list();
  ASSERT_EQ(entries.size(), 2u);
  for (const EntryInfo& e : entries) {
    const bool is_b = e.name == cache->entry_name(b);
    EXPECT_EQ(e.state, is_b ? EntryState::corrupt : EntryState::valid) << e.name;
    EXPECT_GT(e.bytes, 0u);
    if (is_b) {
      EXPECT_THAT(e.problem, HasSubstr("bytes, meta.json records"));
    }
  }

  EXPECT_EQ(disk.clear().entries, 2u);
  EXPECT_TRUE(disk.list().empty());
  EXPECT_TRUE(fs::exists(dir.path() / "my-notes"));
  EXPECT_EQ(read_bytes(dir.path() / "README"), "mine");
}

TEST(KernelCache, ClearedDirectoryIsRefilledByALiveCache) {
  ScratchDir dir;
  LogCapture log;
  auto cache = tiny_cache(dir.path(), &log);
  KernelSpec a, b;
  b.head_dim = 96;
  cache->get(a);
  CacheDirectory(dir.path()).clear();  // removes entries and free locks
  cache->get(b);
  EXPECT_TRUE(fs::exists(cache->entry_dir(b) / "meta.json"));
  EXPECT_TRUE(cache->stats().disk_writable);
  EXPECT_TRUE(log.warnings().empty());
}

}  // namespace
}  // namespace flashgen
