#include "runtime/work_queue.h"

#include <algorithm>

namespace flashgen {

WorkQueue::WorkQueue(std::size_t threads) {
  workers_.reserve(std::max<std::size_t>(1, threads));
  for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i) workers_.emplace_back([this] { work(); });
}

WorkQueue::~WorkQueue() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    dropped.swap(tasks_);
  }
  ready_.notify_all();
  for (std::thread& t : workers_) t.join();
  // `dropped` goes here, outside the lock: a dropped task's state may run code (a future's
  // broken promise wakes its waiter).
}

void WorkQueue::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void WorkQueue::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
      if (closing_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace flashgen
