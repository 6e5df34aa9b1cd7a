// A separate process for the cache's cross-process tests (run by cache_process_test.cpp).
//   cache_race_helper race <cache dir> <ready fd> <go fd>
//       says ready, waits until <go fd> closes, gets the tiny kernel of the default
//       spec, prints "compiles=N disk_hits=N bytes=N xxh3=HEX".
//   cache_race_helper hold <lock file> <ready fd> [purpose]
//       takes the lock (noting `purpose` in it for waiters), says ready, then sleeps until killed.
//   cache_race_helper exit-during-compile <cache dir>
//       prefetches the tiny kernel of the default spec and returns from main once a cache
//       thread has started on it (the cache leaked, as Python's runtime is).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/file_lock.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_json.h"
#include "tests/cache/cache_test_support.h"

namespace {

void say_ready(int fd) {
  const char byte = 'r';
  if (write(fd, &byte, 1) != 1) std::exit(3);
  close(fd);
}

void wait_for_close(int fd) {
  char byte;
  while (read(fd, &byte, 1) > 0) {
  }
  close(fd);
}

int race(const char* dir, int ready_fd, int go_fd) {
  flashgen::KernelCacheOptions options;
  options.dir = dir;
  options.generate = [](const flashgen::KernelSpec& s) { return flashgen::testing_support::tiny_kernel(s); };
  options.log = [](flashgen::LogLevel, const std::string& m) { std::fprintf(stderr, "helper log: %s\n", m.c_str()); };
  flashgen::KernelCache cache(options);
  say_ready(ready_fd);
  wait_for_close(go_fd);
  const flashgen::CompiledKernel& k = cache.get(flashgen::KernelSpec{});
  const flashgen::CacheStats s = cache.stats();
  std::printf("compiles=%ld disk_hits=%ld bytes=%zu xxh3=%s\n", s.compiles, s.disk_hits, k.cubin.size(),
              flashgen::checksum_hex(k.cubin).c_str());
  return 0;
}

int exit_during_compile(const char* dir) {
  static std::atomic<bool> started{false};
  const std::thread::id main_thread = std::this_thread::get_id();
  flashgen::KernelCacheOptions options;
  options.dir = dir;
  options.generate = [main_thread](const flashgen::KernelSpec& s) {
    if (std::this_thread::get_id() != main_thread) {  // the background job, about to compile
      started = true;
      started.notify_all();
    }
    return flashgen::testing_support::tiny_kernel(s);
  };
  options.log = [](flashgen::LogLevel, const std::string& m) { std::fprintf(stderr, "helper log: %s\n", m.c_str()); };
  auto* cache = new flashgen::KernelCache(options);  // never destroyed: nothing joins its threads
  const flashgen::KernelSpec specs[] = {flashgen::KernelSpec{}};
  cache->prefetch(specs);
  started.wait(false);
  return 0;  // exit() while the compile runs
}

int hold(const std::filesystem::path& lock_path, int ready_fd, const char* purpose) {
  const int dir = open(lock_path.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  auto lock = flashgen::FileLock::acquire(dir, lock_path.filename().string(), flashgen::LockRequest{.purpose = purpose},
                                          lock_path.string());
  say_ready(ready_fd);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "race" && argc == 5) return race(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
    if (mode == "hold" && (argc == 4 || argc == 5))
      return hold(argv[2], std::atoi(argv[3]), argc == 5 ? argv[4] : "holding it");
    if (mode == "exit-during-compile" && argc == 3) return exit_during_compile(argv[2]);
    std::fprintf(stderr,
                 "usage: %s race <dir> <ready fd> <go fd> | hold <lock file> <ready fd> [purpose] | "
                 "exit-during-compile <dir>\n",
                 argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cache_race_helper: %s\n", e.what());
    return 1;
  }
}
