// WorkQueue (runtime/work_queue.h): every idle worker takes the next queued task, tasks
// start in submission order, and destruction drops what has not started.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/work_queue.h"

namespace flashgen {
namespace {

// Holds the tasks that wait on it until opened (at most a minute, so a failure never hangs).
struct Gate {
  std::promise<void> promise;
  std::shared_future<void> opened = promise.get_future().share();
  void wait() const { opened.wait_for(std::chrono::seconds(60)); }
};

bool within_a_minute(const std::atomic<int>& n, int want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (n.load() < want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// The property libthread-pool-dev's pool lacked: with every task held, each of the n
// workers runs one. Repeated, since a pool with a queue per thread fails it only when a
// submission meets a worker holding its queue's lock.
TEST(WorkQueue, EveryIdleWorkerTakesAQueuedTask) {
  for (int round = 0; round < 200; ++round) {
    Gate gate;
    std::atomic<int> running{0};
    WorkQueue queue(3);
    std::vector<std::future<void>> done;
    for (int i = 0; i < 3; ++i) done.push_back(queue.submit([&] {
      ++running;
      gate.wait();
    }));
    ASSERT_TRUE(within_a_minute(running, 3)) << "round " << round << ": " << running << " of 3 tasks started";
    gate.promise.set_value();
    for (auto& d : done) d.get();
  }
}

TEST(WorkQueue, OneWorkerRunsTasksInSubmissionOrder) {
  std::vector<int> order;
  std::mutex m;
  {
    WorkQueue queue(1);
    std::vector<std::future<void>> done;
    for (int i = 0; i < 50; ++i) done.push_back(queue.submit([&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    }));
    for (auto& d : done) d.get();
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkQueue, ResultsAndExceptionsArriveThroughTheFuture) {
  WorkQueue queue(2);
  auto value = queue.submit([] { return 42; });
  auto error = queue.submit([]() -> int { throw std::runtime_error("compile failed"); });
  EXPECT_EQ(value.get(), 42);
  EXPECT_THROW(error.get(), std::runtime_error);
}

TEST(WorkQueue, DestructionWaitsForRunningTasksAndDropsQueuedOnes) {
  Gate gate;
  std::atomic<int> started{0}, finished{0};
  std::future<void> queued;
  std::thread opener;
  {
    WorkQueue queue(1);
    auto running = queue.submit([&] {
      ++started;
      gate.wait();
      ++finished;
    });
    queued = queue.submit([&] { ++started; });
    ASSERT_TRUE(within_a_minute(started, 1));
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate.promise.set_value();
    });
  }  // waits for the running task only
  opener.join();
  EXPECT_EQ(finished.load(), 1);
  EXPECT_EQ(started.load(), 1) << "a queued task ran after the queue was destroyed";
  try {
    queued.get();
    FAIL() << "a dropped task's future reported success";
  } catch (const std::future_error& e) {
    EXPECT_EQ(e.code(), std::future_errc::broken_promise);
  }
}

}  // namespace
}  // namespace flashgen
