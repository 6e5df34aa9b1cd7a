// time_on_stream on a GPU: the call sequence (warm-up, then reset before every timed
// run), the work really runs, the L2 flush leaves the caller's memory alone, errors
// from the caller's enqueue come through. No assertion on how long anything takes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_timer.h"

namespace flashgen::test {
namespace {

class KernelTimerGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    // An odd element count, tens of MiB: the memset takes measurable time.
    words_ = std::uniform_int_distribution<std::size_t>(5'000'000, 9'000'000)(rng_) | 1;
    check_cuda(cuda_driver().cuMemAlloc(&buffer_, words_ * 4), "cuMemAlloc");
  }
  void TearDown() override {
    if (buffer_) cuda_driver().cuMemFree(buffer_);
  }

  unsigned read_word(std::size_t index) const {
    unsigned value = 0;
    check_cuda(cuda_driver().cuMemcpyDtoH(&value, buffer_ + index * 4, 4), "cuMemcpyDtoH");
    return value;
  }

  unsigned seed_ = 0;
  std::mt19937 rng_;
  std::size_t words_ = 0;
  CUdeviceptr buffer_ = 0;
};

TEST_F(KernelTimerGpu, WarmupThenResetBeforeEveryTimedRun) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const TimingOptions options{.warmup = std::uniform_int_distribution(0, 3)(rng_),
                              .repeats = std::uniform_int_distribution(1, 9)(rng_),
                              .flush_l2 = true};
  const unsigned value = static_cast<unsigned>(rng_());
  std::string calls;
  const Timing t = time_on_stream(
      nullptr,
      [&] {
        calls += 'e';
        check_cuda(cuda_driver().cuMemsetD32Async(buffer_, value, words_, nullptr), "cuMemsetD32Async");
      },
      [&] { calls += 'r'; }, options);

  std::string expected(options.warmup, 'e');
  for (int i = 0; i < options.repeats; ++i) expected += "re";
  EXPECT_EQ(calls, expected);
  EXPECT_GT(t.min_ms, 0.0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_LE(t.median_ms, t.max_ms);
  // The flush wrote its own buffer: the caller's holds what enqueue wrote.
  EXPECT_EQ(read_word(0), value);
  EXPECT_EQ(read_word(words_ / 3), value);
  EXPECT_EQ(read_word(words_ - 1), value);
}

TEST_F(KernelTimerGpu, WithoutFlushAndWithoutReset) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int repeats = std::uniform_int_distribution(2, 6)(rng_);
  int enqueued = 0;
  const Timing t = time_on_stream(
      nullptr,
      [&] {
        ++enqueued;
        check_cuda(cuda_driver().cuMemsetD32Async(buffer_, 7u, words_, nullptr), "cuMemsetD32Async");
      },
      {}, TimingOptions{.warmup = 1, .repeats = repeats, .flush_l2 = false});
  EXPECT_EQ(enqueued, 1 + repeats);
  EXPECT_GT(t.min_ms, 0.0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_LE(t.median_ms, t.max_ms);
}

TEST_F(KernelTimerGpu, ErrorsFromEnqueueComeThrough) {
  int run = 0;
  try {
    time_on_stream(
        nullptr,
        [&] {
          if (++run == 3) throw Error(Status::unsupported, "third run refused");
        },
        {}, TimingOptions{.warmup = 1, .repeats = 5, .flush_l2 = true});
    ADD_FAILURE() << "the error thrown by enqueue was swallowed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    EXPECT_STREQ(e.what(), "third run refused");
  }
  // The timer stays usable after a failed timing.
  const Timing t = time_on_stream(nullptr, [&] {
    check_cuda(cuda_driver().cuMemsetD32Async(buffer_, 1u, words_, nullptr), "cuMemsetD32Async");
  }, {});
  EXPECT_GT(t.median_ms, 0.0);
}

TEST_F(KernelTimerGpu, NoCurrentContextIsAClearError) {
  // A fresh thread has no current context.
  Status status = Status::ok;
  std::string message;
  std::thread([&] {
    try {
      time_on_stream(nullptr, [] {}, {});
    } catch (const Error& e) {
      status = e.status();
      message = e.what();
    }
  }).join();
  EXPECT_EQ(status, Status::invalid_argument) << message;
  EXPECT_NE(message.find("no CUDA context is current"), std::string::npos) << message;
}

}  // namespace
}  // namespace flashgen::test
