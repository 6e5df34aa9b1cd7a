// `flashgen cache ...` (and a bad FLASHGEN_* value in any command) run as processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "runtime/cache_directory.h"
#include "runtime/kernel_cache.h"
#include "tests/cache/cache_test_support.h"
#include "tests/cache/cli_run.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::read_bytes;
using testing_support::flashgen;
using testing_support::CliRun;
using testing_support::ScratchDir;
using testing_support::tiny_kernel;
using testing_support::write_bytes;
namespace fs = std::filesystem;

// Two entries in `dir`; returns the second's directory.
fs::path two_entries(const fs::path& dir) {
  KernelCacheOptions options;
  options.dir = dir;
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  KernelCache cache(options);
  KernelSpec a, b;
  b.head_dim = 64;
  cache.get(a);
  cache.get(b);
  return cache.entry_dir(b);
}

TEST(CacheCli, LsAndStatsReportAWronglyTypedEntryByNameAndListTheOthers) {
  ScratchDir dir;
  const fs::path damaged = two_entries(dir.path());
  auto meta = nlohmann::json::parse(read_bytes(damaged / "meta.json"));
  meta["resources"]["registers"] = "many";
  write_bytes(damaged / "meta.json", meta.dump());

  const CliRun ls = flashgen("", fmt::format("cache ls --dir '{}'", dir.path().string()));
  EXPECT_EQ(ls.status, 0) << ls.output;
  EXPECT_THAT(ls.output, Not(HasSubstr("json.exception")));
  EXPECT_THAT(ls.output, HasSubstr(damaged.filename().string() + " "));
  EXPECT_THAT(ls.output, HasSubstr("damaged: " + (damaged / "meta.json").string() + " field \"resources\""));
  EXPECT_THAT(ls.output, HasSubstr("ok\n")) << "the valid entry must still be listed";

  const CliRun stats = flashgen("", fmt::format("cache stats --dir '{}'", dir.path().string()));
  EXPECT_EQ(stats.status, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr("entries          2 (1 damaged"));
}

// `cache stats` names the package's kernel sets (FLASHGEN_PACKAGED_KERNELS) with their entries,
// the damaged ones counted, and says so when there is no set; nothing else in it is a set.
TEST(CacheCli, StatsListsThePackagesKernelSets) {
  ScratchDir scratch;
  const fs::path pkg = scratch.path() / "pkg";
  const CliRun none = flashgen(fmt::format("FLASHGEN_PACKAGED_KERNELS='{}'", pkg.string()),
                               fmt::format("cache stats --dir '{}'", (scratch.path() / "cache").string()));
  EXPECT_EQ(none.status, 0) << none.output;
  EXPECT_THAT(none.output, HasSubstr(fmt::format("packaged kernels {} (no set)\n", pkg.string())));

  two_entries(pkg / "nvrtc-12.9");
  const fs::path damaged = two_entries(pkg / "nvrtc-13.0");
  two_entries(pkg / "nvrtc-13.0.1");
  fs::remove(damaged / "kernel.cubin");
  const CliRun stats = flashgen(fmt::format("FLASHGEN_PACKAGED_KERNELS='{}'", pkg.string()),
                                fmt::format("cache stats --dir '{}'", (scratch.path() / "cache").string()));
  EXPECT_EQ(stats.status, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr(fmt::format("packaged kernels {}\n"
                                                  "  NVRTC 13.0     2 entries (1 damaged: compiled instead)\n"
                                                  "  NVRTC 12.9     2 entries (0 damaged: compiled instead)\n",
                                                  pkg.string())));
  EXPECT_THAT(stats.output, Not(HasSubstr("13.0.1")));
  const std::string cache = (scratch.path() / "cache").string();
  const CliRun unset = flashgen("-u FLASHGEN_PACKAGED_KERNELS", fmt::format("cache stats --dir '{}'", cache));
  EXPECT_THAT(unset.output, Not(HasSubstr("packaged kernels")));
}

TEST(CacheCli, LsOfAFifoMetaDoesNotBlock) {
  ScratchDir dir;
  const fs::path damaged = two_entries(dir.path());
  fs::remove(damaged / "meta.json");
  ASSERT_EQ(mkfifo((damaged / "meta.json").c_str(), 0644), 0);
  const CliRun ls = flashgen("", fmt::format("cache ls --dir '{}'", dir.path().string()));
  EXPECT_NE(ls.status, 124) << "cache ls blocked on a FIFO";
  EXPECT_EQ(ls.status, 0) << ls.output;
  EXPECT_THAT(ls.output, HasSubstr("is a FIFO"));
}

TEST(CacheCli, ClearReportsWhatItLeftAndRefusesALinkedDirectory) {
  ScratchDir dir;
  const fs::path root = dir.path() / "cache";
  two_entries(root);
  write_bytes(root / ".tmp" / "notes.txt", "mine");
  fs::create_directory_symlink(root, dir.path() / "link");

  const CliRun linked = flashgen("", fmt::format("cache clear --dir '{}'", (dir.path() / "link").string()));
  EXPECT_EQ(linked.status, 1) << linked.output;
  EXPECT_THAT(linked.output, HasSubstr("symbolic link"));
  EXPECT_EQ(CacheDirectory(root).list().size(), 2u);

  const CliRun clear = flashgen("", fmt::format("cache clear --dir '{}'", root.string()));
  EXPECT_EQ(clear.status, 0) << clear.output;
  EXPECT_THAT(clear.output, HasSubstr("removed 2 kernels and 2 temporary or lock files"));
  EXPECT_THAT(clear.output, HasSubstr("skipped .tmp/notes.txt: not created by flashgen"));
  EXPECT_EQ(read_bytes(root / ".tmp" / "notes.txt"), "mine");
}

TEST(CacheCli, BadBooleanOrEnumFailsEveryCommandAsTheRuntimeDoes) {
  ScratchDir dir;
  const std::string ls = fmt::format("cache ls --dir '{}'", dir.path().string());
  for (const auto& [env, message] : std::vector<std::pair<std::string, std::string>>{
           {"FLASHGEN_DISABLE_DISK_CACHE=maybe", "FLASHGEN_DISABLE_DISK_CACHE: got 'maybe', expected 1, 0, true"},
           {"FLASHGEN_LOG_LEVEL=bogus", "FLASHGEN_LOG_LEVEL: got 'bogus'"},
           {"FLASHGEN_AUTOTUNE=bogus", "FLASHGEN_AUTOTUNE: got 'bogus'"}}) {
    for (const std::string& args : {ls, std::string("demo --no-kernels --batch 1 --seqlen 8 --heads 1 --head-dim 16")}) {
      const CliRun r = flashgen(env, args);
      EXPECT_EQ(r.status, 1) << env << " " << args << "\n" << r.output;
      EXPECT_THAT(r.output, HasSubstr("invalid argument: " + message)) << env << " " << args;
    }
  }
  // A valid spelling in any case is accepted.
  const CliRun off = flashgen("FLASHGEN_DISABLE_DISK_CACHE=FALSE", "cache stats --dir " + dir.path().string());
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_THAT(off.output, Not(HasSubstr("disabled by FLASHGEN_DISABLE_DISK_CACHE")));
  const CliRun on = flashgen("FLASHGEN_DISABLE_DISK_CACHE=Yes", "cache stats --dir " + dir.path().string());
  EXPECT_THAT(on.output, HasSubstr("disabled by FLASHGEN_DISABLE_DISK_CACHE"));
}

TEST(CacheCli, EnvListsABadValueAndDocumentsThePerUserFallback) {
  const CliRun r = flashgen("-u HOME -u XDG_CACHE_HOME -u FLASHGEN_CACHE_DIR TMPDIR=/tmp FLASHGEN_LOG_LEVEL=loud",
                            "cache env");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("invalid: FLASHGEN_LOG_LEVEL: got 'loud'"));
  EXPECT_THAT(r.output, HasSubstr("$TMPDIR/flashgen-cache-<uid>"));
  EXPECT_THAT(r.output, HasSubstr("created 0700"));
  EXPECT_THAT(r.output, HasSubstr(fmt::format("cache directory in use: /tmp/flashgen-cache-{}\n", geteuid())));
  EXPECT_THAT(r.output, HasSubstr("FLASHGEN_CACHE_LOCK_TIMEOUT"));
}

}  // namespace
}  // namespace flashgen
