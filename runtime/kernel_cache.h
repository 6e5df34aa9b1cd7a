// Two-level kernel cache: memory (per process) over a content-addressed disk
// directory shared by processes. get() compiles on a miss; load() gives a CUfunction.
#pragma once

#include <cuda.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/nvrtc_compiler.h"

namespace flashgen {

struct CacheStats {
  long memory_hits = 0;
  long disk_hits = 0;
  long compiles = 0;
  long corrupt_entries = 0;
};

struct LoadedKernel {
  CUfunction function = nullptr;
  const CompiledKernel* kernel = nullptr;  // owned by the cache
};

class KernelCache {
 public:
  // dir empty: the default from the environment registry.
  explicit KernelCache(std::filesystem::path dir = {});
  ~KernelCache();

  // The compiled kernel for spec: memory, else disk (verified), else NVRTC (and stored).
  const CompiledKernel& get(const KernelSpec& spec);
  // Compiles every missing spec in parallel; returns in the order given.
  std::vector<const CompiledKernel*> get_many(std::span<const KernelSpec> specs);
  // The kernel loaded into the current CUDA context (dynamic smem attribute set).
  LoadedKernel load(const KernelSpec& spec);

  std::string key(const KernelSpec& spec) const;  // content hash used for the entry name
  std::filesystem::path entry_dir(const KernelSpec& spec) const;
  const std::filesystem::path& dir() const;
  CacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashgen
