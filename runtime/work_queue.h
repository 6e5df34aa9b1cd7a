// WorkQueue: a fixed set of worker threads that take tasks from one shared FIFO, in the
// order they were submitted. The compile threads of the kernel cache (get_many, prefetch),
// of the autotuner and the CPU backend's parallel_for run on it.
//
// Why not libthread-pool-dev's thread_pool::ThreadPool, used before: it keeps one queue
// per thread and a worker asleep on its own empty queue never takes tasks queued on
// another's. Two compiles could land behind each other on one thread while the other
// thread slept, so a cold start compiled serially, and a test that waited for two
// concurrent compiles hung (CI, 2026-12-01).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace flashgen {

class WorkQueue {
 public:
  explicit WorkQueue(std::size_t threads);
  // Drops the tasks not started yet (their futures report std::future_errc::broken_promise)
  // and waits for the running ones.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues f(); its result or exception arrives through the future.
  template <class F>
  auto submit(F f) -> std::future<std::invoke_result_t<F&>> {
    using R = std::invoke_result_t<F&>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(f));
    std::future<R> result = task->get_future();
    post([task] { (*task)(); });
    return result;
  }

 private:
  void post(std::function<void()> task);
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool closing_ = false;
  std::vector<std::thread> workers_;  // last: started once the queue exists
};

}  // namespace flashgen
