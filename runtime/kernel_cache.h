// Two-level kernel cache: memory (per process) over a content-addressed disk
// directory shared by processes. get() compiles on a miss; load() gives a CUfunction.
//
// Key = XXH3-128 of (generated source, NVRTC options, NVRTC version, arch,
// flashgen version, cache-invalidating environment variables); no paths, no times.
// Disk layout, atomicity and what is trusted: runtime/cache_directory.h. Cross-process:
// one flock per key, so N processes asking for one kernel compile it once and the others
// load it; a holder is waited for at most FLASHGEN_CACHE_LOCK_TIMEOUT, then the kernel is
// compiled in memory.
#pragma once

#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "flashgen/flashgen.hpp"
#include "runtime/nvrtc_compiler.h"

// The driver's handle type, declared as cuda.h does, so this header needs no CUDA headers.
typedef struct CUfunc_st* CUfunction;

namespace flashgen {

struct CacheStats {
  long memory_hits = 0;
  long disk_hits = 0;      // entries read: the cache directory's, the read-only ones' and the package's
  long packaged_hits = 0;  // of disk_hits: from the package's kernel set (KernelCacheOptions::packaged_kernels)
  long compiles = 0;
  long corrupt_entries = 0;  // entries found damaged (recompiled and replaced)
  bool disk_writable = false;  // false: new kernels stay in memory (read-only dir, disabled, not used yet)
};

struct LoadedKernel {
  CUfunction function = nullptr;
  const CompiledKernel* kernel = nullptr;  // owned by the cache
};

// What get_many reports for one spec as soon as it is resolved: its index in the specs
// given, the kernel (null on failure) and the failure (null on success).
struct KernelReady {
  size_t index = 0;
  const CompiledKernel* kernel = nullptr;
  std::exception_ptr error;
};
// Called once per spec, never twice at a time (get_many serialises the calls).
using KernelReadySink = std::function<void(const KernelReady&)>;

// KernelSpec -> source; generate_source by default (tests plug in tiny kernels).
using SourceGenerator = std::function<GeneratedSource(const KernelSpec&)>;

struct KernelCacheOptions {
  std::filesystem::path dir;  // empty: FLASHGEN_CACHE_DIR or its default (environment registry)
  // Read-only cache directories searched, in order, for a kernel `dir` lacks before compiling
  // it (never written; a refused one is said once and skipped). nullopt: FLASHGEN_CACHE_READ_DIRS.
  std::optional<std::vector<std::filesystem::path>> read_dirs;
  // The kernel set shipped with flashgen's package (the wheel's flashgen/kernels): one warmed
  // directory per NVRTC release that compiled it, named by packaged_set_name() (`flashgen
  // cache warm --package`). Searched before anything else with the key that release gives,
  // so a shipped kernel needs no NVRTC at all; a set the driver cannot load (a newer CUDA
  // major) is skipped. Read with the package's trust (runtime/cache_files.h), never written.
  // nullopt: FLASHGEN_PACKAGED_KERNELS (unset: none); empty: none.
  std::optional<std::filesystem::path> packaged_kernels;
  bool use_disk = true;       // false, or FLASHGEN_DISABLE_DISK_CACHE: memory only
  SourceGenerator generate;   // empty: generate_source
  LogSink log;                // empty: default_log_sink() (stderr, FLASHGEN_LOG_LEVEL)
  int compile_threads = 0;    // get_many's and prefetch's threads; 0: hardware concurrency
};

// The subdirectory of a package's kernel set that NVRTC `nvrtc` compiled: "nvrtc-13.0".
std::string packaged_set_name(NvrtcVersion nvrtc);

struct PackagedSetDir {
  NvrtcVersion nvrtc;
  std::filesystem::path path;
};
// The sets of the package at `root` (KernelCacheOptions::packaged_kernels), newest NVRTC
// first: its subdirectories named by packaged_set_name(), nothing else. None when `root` does
// not exist; `problem` says why when it is refused (a link, not a directory).
std::vector<PackagedSetDir> packaged_set_dirs(const std::filesystem::path& root, std::string& problem);

class KernelCache {
 public:
  // dir empty: the default from the environment registry.
  explicit KernelCache(std::filesystem::path dir = {});
  // The environment (NVRTC flags, dump dir, disk switch) is read once, here.
  explicit KernelCache(KernelCacheOptions options);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The compiled kernel for spec: memory, else disk (verified), else NVRTC (and stored).
  // The reference stays valid for the cache's lifetime. Thread-safe.
  const CompiledKernel& get(const KernelSpec& spec);
  // Compiles every missing spec in parallel; returns in the order given. `on_ready` hears of
  // each spec as it is resolved (for progress); after all are done, the first failure is
  // rethrown.
  std::vector<const CompiledKernel*> get_many(std::span<const KernelSpec> specs,
                                              const KernelReadySink& on_ready = {});
  // Reads the entries of specs not in memory yet (disk, read-only dirs, package) and starts
  // compiling the others on the cache's background threads (compile_threads of them), then
  // returns: a later get() or load() of one finds it ready or waits only for the rest of its
  // compile, and kernels already in memory are served meanwhile without waiting. Errors are
  // not reported here: the get() that needs the kernel tries again and throws. Thread-safe;
  // at destruction compiles not started yet are dropped, running ones finish; at process
  // exit, running compiles finish first (runtime/exit_drain.h).
  void prefetch(std::span<const KernelSpec> specs);
  // Whether every spec is in memory or has an entry (the package, the cache directory, a
  // read-only one), read into memory here; nothing is compiled, and a spec another thread
  // is resolving counts as not ready (no wait). What a call may run at once without a compile.
  bool ready(std::span<const KernelSpec> specs);
  // The kernel loaded into the current CUDA context (dynamic smem attribute set);
  // one module per (kernel, context). Throws Error(no_device) without a driver.
  LoadedKernel load(const KernelSpec& spec);

  std::string key(const KernelSpec& spec) const;  // content hash (32 hex digits)
  // The key NVRTC `nvrtc` gives it (a packaged set's entries carry their release's keys).
  std::string key(const KernelSpec& spec, NvrtcVersion nvrtc) const;
  std::string entry_name(const KernelSpec& spec) const;  // <uri>-<first 16 hex digits of key>
  std::filesystem::path entry_dir(const KernelSpec& spec) const;
  std::filesystem::path lock_path(const KernelSpec& spec) const;
  const std::filesystem::path& dir() const;
  // The NVRTC options every kernel of this cache is compiled with (part of the key).
  const CompileOptions& compile_options() const;
  CacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashgen
