// Runs a loop's iterations on worker threads (runtime/work_queue.h). Each iteration writes its own outputs, so
// results never depend on the number of threads or on the order in which tasks run.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include "runtime/work_queue.h"

namespace flashgen::cpu {

// The number of workers for a `threads` argument: 0 means hardware concurrency.
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Calls task(i) once for every i in [0, count). Workers pull indices from a shared
// counter, so uneven tasks (causal tiles) still balance. A task's exception is rethrown.
template <class Task>
void parallel_for(int threads, std::int64_t count, const Task& task) {
  const std::int64_t workers = std::min<std::int64_t>(resolve_threads(threads), count);
  if (workers <= 1) {
    for (std::int64_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t i = next++; i < count; i = next++) task(i);
  };
  WorkQueue pool(static_cast<std::size_t>(workers));
  std::vector<std::future<void>> done;
  for (std::int64_t w = 0; w < workers; ++w) done.push_back(pool.submit(work));
  for (auto& d : done) d.get();
}

}  // namespace flashgen::cpu
