// The cache across real processes: a race on one key, a killed lock owner, an exit during a
// background compile, a read-only directory (as another user), and a machine without a CUDA
// driver.
#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/file_lock.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_json.h"
#include "tests/cache/cache_test_support.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::read_bytes;
using testing_support::exit_code;
using testing_support::run_without_write_access;
using testing_support::ScratchDir;
using testing_support::tiny_kernel;
namespace fs = std::filesystem;

struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    read_end = fds[0];
    write_end = fds[1];
  }
};

// Starts cache_race_helper with `args`, stdout to `out_file`; returns its pid.
pid_t spawn_helper(std::vector<std::string> args, const fs::path& out_file, const std::vector<int>& close_in_child) {
  args.insert(args.begin(), CACHE_RACE_HELPER);
  const pid_t pid = fork();
  if (pid == 0) {
    for (int fd : close_in_child) close(fd);
    const int out = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) dup2(out, STDOUT_FILENO);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

TEST(KernelCacheProcesses, EightProcessesRacingOnOneKeyCompileOnce) {
  constexpr int kProcesses = 8;
  ScratchDir cache_dir, outputs;
  Pipe ready, go;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i)
    pids.push_back(spawn_helper({"race", cache_dir.path().string(), std::to_string(ready.write_end),
                                 std::to_string(go.read_end)},
                                outputs.path() / fmt::format("out{}", i), {ready.read_end, go.write_end}));
  close(ready.write_end);
  close(go.read_end);
  // Every helper has built its cache and waits: release them all at once.
  char byte;
  int ready_count = 0;
  while (ready_count < kProcesses && read(ready.read_end, &byte, 1) == 1) ++ready_count;
  close(ready.read_end);
  ASSERT_EQ(ready_count, kProcesses);
  close(go.write_end);

  long compiles = 0, disk_hits = 0;
  std::set<std::string> checksums;
  for (int i = 0; i < kProcesses; ++i) {
    ASSERT_EQ(exit_code(pids[i]), 0) << "helper " << i;
    const std::string out = read_bytes(outputs.path() / fmt::format("out{}", i));
    long c = -1, d = -1;
    size_t bytes = 0;
    char sum[17] = {};
    ASSERT_EQ(std::sscanf(out.c_str(), "compiles=%ld disk_hits=%ld bytes=%zu xxh3=%16s", &c, &d, &bytes, sum), 4)
        << out;
    compiles += c;
    disk_hits += d;
    EXPECT_GT(bytes, 0u);
    checksums.insert(sum);
  }
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(disk_hits, kProcesses - 1);
  ASSERT_EQ(checksums.size(), 1u) << "processes got different cubins";

  // The one entry on disk is the cubin they all got, and is valid.
  KernelCacheOptions options;
  options.dir = cache_dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  KernelCache cache(options);
  const CompiledKernel& k = cache.get(KernelSpec{});
  EXPECT_TRUE(k.from_disk_cache);
  EXPECT_EQ(checksum_hex(k.cubin), *checksums.begin());
}

// flock is released by the kernel when its holder dies: that is how a dead owner's lock is broken.
TEST(KernelCacheProcesses, KilledLockOwnerDoesNotBlockOthers) {
  ScratchDir cache_dir, outputs;
  KernelCacheOptions options;
  options.dir = cache_dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  KernelCache cache(options);
  const KernelSpec spec;
  const fs::path lock = cache.lock_path(spec);
  fs::create_directories(lock.parent_path());

  Pipe ready;
  const pid_t owner = spawn_helper({"hold", lock.string(), std::to_string(ready.write_end)}, outputs.path() / "hold",
                                   {ready.read_end});
  close(ready.write_end);
  char byte;
  ASSERT_EQ(read(ready.read_end, &byte, 1), 1) << "the lock owner did not start";
  close(ready.read_end);
  EXPECT_FALSE(FileLock::try_acquire(lock).has_value()) << "the helper should hold the lock";

  ASSERT_EQ(kill(owner, SIGKILL), 0);
  EXPECT_EQ(exit_code(owner), 128 + SIGKILL);

  EXPECT_TRUE(FileLock::try_acquire(lock).has_value()) << "a dead owner's lock must be free";
  const CompiledKernel& k = cache.get(spec);
  EXPECT_FALSE(k.from_disk_cache);
  EXPECT_EQ(cache.stats().compiles, 1);
  EXPECT_TRUE(fs::exists(cache.entry_dir(spec) / "kernel.cubin"));
}

// A process that returns from main while a cache thread compiles waits for that compile
// (runtime/exit_drain.h): it used to die inside NVRTC now and then (its exit handlers ran
// under the compile) and, when it lived, to leave no entry behind.
TEST(KernelCacheProcesses, ExitDuringABackgroundCompileWaitsForIt) {
  for (int run = 0; run < 4; ++run) {
    ScratchDir cache_dir, outputs;
    const pid_t pid = spawn_helper({"exit-during-compile", cache_dir.path().string()}, outputs.path() / "out", {});
    ASSERT_EQ(exit_code(pid), 0) << "run " << run << ": the process died at exit";
    KernelCacheOptions options;
    options.dir = cache_dir.path();
    options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
    KernelCache cache(options);
    EXPECT_TRUE(cache.get(KernelSpec{}).from_disk_cache) << "run " << run << ": the compile was cut off at exit";
  }
}

// A live holder is waited for with a bound and a message naming it; then the kernel is
// compiled in memory. (It used to block forever.)
TEST(KernelCacheProcesses, LockHeldByALiveProcessIsWaitedForThenCompiledInMemory) {
  ScratchDir cache_dir, outputs;
  testing_support::ScopedEnv timeout("FLASHGEN_CACHE_LOCK_TIMEOUT", "0.3");
  const KernelSpec spec;
  const fs::path log_file = outputs.path() / "log";
  KernelCacheOptions options;
  options.dir = cache_dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  options.log = [&](LogLevel level, const std::string& m) {
    std::ofstream(log_file, std::ios::app) << to_string(level) << ": " << m << "\n";
  };
  KernelCache cache(options);
  const fs::path lock = cache.lock_path(spec);
  fs::create_directories(lock.parent_path());

  Pipe ready;
  const pid_t owner = spawn_helper({"hold", lock.string(), std::to_string(ready.write_end), "compiling " + spec.uri()},
                                   outputs.path() / "hold", {ready.read_end});
  close(ready.write_end);
  char byte;
  ASSERT_EQ(read(ready.read_end, &byte, 1), 1) << "the lock owner did not start";
  close(ready.read_end);

  const int code = testing_support::run_bounded(30, [&] {
    const CompiledKernel& k = cache.get(spec);
    const bool ok = !k.cubin.empty() && !k.from_disk_cache && cache.stats().compiles == 1 &&
                    !fs::exists(cache.entry_dir(spec));
    return ok ? 0 : 1;
  });
  kill(owner, SIGKILL);
  exit_code(owner);
  ASSERT_NE(code, -1) << "get() blocked on a lock held by a live process";
  EXPECT_EQ(code, 0) << "expected an in-memory compile that leaves the entry to the holder";
  const std::string log = read_bytes(log_file);
  EXPECT_THAT(log, HasSubstr(fmt::format("info: kernel cache: waiting up to 0.3 s for process {} compiling {}", owner,
                                         spec.uri())));
  EXPECT_THAT(log, HasSubstr(fmt::format("warning: kernel cache: process {} compiling {} still holds", owner,
                                         spec.uri())));
  EXPECT_THAT(log, HasSubstr("compiling " + spec.uri() + " in memory without the cache"));
}

TEST(KernelCacheProcesses, ReadOnlyDirectoryCompilesInMemoryWithOneWarning) {
  ScratchDir dir;
  KernelSpec present, absent1, absent2;
  absent1.head_dim = 64;
  absent2.head_dim = 96;
  {
    KernelCacheOptions options;
    options.dir = dir.path();
    options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
    KernelCache writer(options);
    writer.get(present);
  }
  const int code = run_without_write_access(dir.path(), [&] {
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "read-only scenario: %s\n", what);
        ++failures;
      }
    };
    try {
      int warnings = 0;
      std::string warning;
      KernelCacheOptions options;
      options.dir = dir.path();
      options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
      options.log = [&](LogLevel level, const std::string& m) {
        if (level == LogLevel::warning) {
          ++warnings;
          warning = m;
        }
      };
      KernelCache cache(options);
      check(cache.get(present).from_disk_cache, "an existing entry must still load");
      check(!cache.get(absent1).cubin.empty(), "a missing kernel must compile in memory");
      check(!cache.get(absent2).cubin.empty(), "a second missing kernel must compile in memory");
      check(cache.stats().compiles == 2, "two compiles expected");
      check(cache.stats().disk_hits == 1, "one disk hit expected");
      check(!cache.stats().disk_writable, "the directory must be reported unwritable");
      check(warnings == 1, "exactly one warning expected");
      check(warning.find(dir.path().string()) != std::string::npos, "the warning must name the directory");
      check(!fs::exists(cache.entry_dir(absent1)), "nothing may be written");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "read-only scenario threw: %s\n", e.what());
      return 1;
    }
    return failures == 0 ? 0 : 1;
  });
  if (code == 77) GTEST_SKIP() << "cannot switch to user nobody to test a read-only directory";
  EXPECT_EQ(code, 0) << "see the scenario's messages on stderr";
}

TEST(CudaDriver, WithoutLibcudaGpuCallsSayNoDevice) {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
    GTEST_SKIP() << "this machine has a CUDA driver";
  }
  EXPECT_FALSE(cuda_available());
  try {
    ensure_context(0);
    FAIL() << "ensure_context succeeded without a driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::no_device);
    EXPECT_THAT(e.what(), HasSubstr("libcuda.so.1"));
    EXPECT_THAT(e.what(), HasSubstr("CPU tensors still work"));
  }

  ScratchDir dir;
  KernelCacheOptions options;
  options.dir = dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  KernelCache cache(options);
  try {
    cache.load(KernelSpec{});
    FAIL() << "load succeeded without a driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::no_device);
    EXPECT_THAT(e.what(), HasSubstr("no CUDA driver found"));
  }
  EXPECT_EQ(cache.stats().compiles, 0) << "load must fail before compiling";
  // Compiling needs no driver.
  EXPECT_FALSE(cache.get(KernelSpec{}).cubin.empty());
}

}  // namespace
}  // namespace flashgen
