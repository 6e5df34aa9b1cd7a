// A KernelCache over the tiny kernel generator, and a sink that keeps what it logs: shared
// by the cache tests.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cache_test_support.h"
#include "runtime/kernel_cache.h"

namespace flashgen::testing_support {

// Collects what the cache logs.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogSink sink() {
    return [this](LogLevel level, const std::string& m) {
      std::lock_guard lock(mutex);
      lines.emplace_back(level, m);
    };
  }
  std::vector<std::string> warnings() {
    std::lock_guard lock(mutex);
    std::vector<std::string> out;
    for (const auto& [level, m] : lines)
      if (level == LogLevel::warning) out.push_back(m);
    return out;
  }
};

// `salt` changes every kernel's source (and so its key) without changing its name.
inline std::unique_ptr<KernelCache> tiny_cache(const std::filesystem::path& dir, LogCapture* log = nullptr,
                                               int salt = 0) {
  KernelCacheOptions options;
  options.dir = dir;
  options.generate = [salt](const KernelSpec& s) { return tiny_kernel(s, salt); };
  options.log = log ? log->sink() : [](LogLevel, const std::string&) {};
  return std::make_unique<KernelCache>(options);
}

}  // namespace flashgen::testing_support
