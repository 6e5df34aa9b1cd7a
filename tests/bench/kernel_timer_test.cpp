// time_on_stream on any machine: bad options are rejected before the driver is touched,
// and without a GPU the call fails with a clear no_device error, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_timer.h"

namespace flashgen::test {
namespace {

void expect_error(Status status, const char* message_regex, const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << "expected Error(" << to_string(status) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_THAT(e.what(), ::testing::ContainsRegex(message_regex));
  }
}

TEST(KernelTimer, NoDeviceIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present: this test is for machines without one";
  int calls = 0;
  expect_error(Status::no_device, "CUDA|GPU|driver|device", [&] {
    time_on_stream(nullptr, [&] { ++calls; }, {});
  });
  EXPECT_EQ(calls, 0) << "enqueue ran although there is no device";
}

TEST(KernelTimer, RejectsBadOptionsNamingThem) {
  const auto nothing = [] {};
  expect_error(Status::invalid_argument, "repeats: is 0", [&] {
    time_on_stream(nullptr, nothing, {}, TimingOptions{.warmup = 1, .repeats = 0, .flush_l2 = true});
  });
  expect_error(Status::invalid_argument, "warmup: is -1", [&] {
    time_on_stream(nullptr, nothing, {}, TimingOptions{.warmup = -1, .repeats = 3, .flush_l2 = false});
  });
  expect_error(Status::invalid_argument, "enqueue is empty", [&] { time_on_stream(nullptr, {}, {}); });
}

}  // namespace
}  // namespace flashgen::test
