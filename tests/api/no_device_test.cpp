// Valid CUDA tensors on a machine without a usable GPU: a clear no_device error from every
// entry point, never a crash (the device pointers here are fake and must not be touched).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "attention_call.h"
#include "runtime/cuda_driver.h"

namespace flashgen::test {
namespace {

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_available()) GTEST_SKIP() << "a GPU is present: this test is for machines without one";
    call_ = factory_.make(random_device_geometry(random_.rng));
  }

  RandomSource random_;
  CallFactory factory_;
  AttentionCall call_;
};

// The message says what is missing: a CUDA driver / GPU / device.
void expect_clear_message(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  EXPECT_THAT(lower, ::testing::ContainsRegex("cuda|gpu|driver|device")) << message;
}

template <typename Call>
void expect_no_device(Call&& call) {
  try {
    call();
    ADD_FAILURE() << "a device call succeeded on a machine without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::no_device) << e.what();
    expect_clear_message(e.what());
  }
}

TEST_F(NoDevice, CppForwardAndBackward) {
  Runtime runtime;
  expect_no_device([&] { runtime.forward(call_.forward()); });
  expect_no_device([&] { runtime.backward(call_.backward()); });
}

TEST_F(NoDevice, CppWorkspaceQuery) {
  Runtime runtime;
  expect_no_device([&] { runtime.backward_workspace_bytes(call_.backward()); });
}

TEST_F(NoDevice, CApi) {
  flashgen_runtime* runtime = nullptr;
  ASSERT_EQ(flashgen_runtime_create(nullptr, &runtime), FLASHGEN_OK);
  const flashgen_forward_args fwd = to_c_forward(call_);
  const flashgen_backward_args bwd = to_c_backward(call_);
  EXPECT_EQ(flashgen_forward(runtime, &fwd, nullptr), FLASHGEN_ERROR_NO_DEVICE);
  expect_clear_message(flashgen_last_error());
  EXPECT_EQ(flashgen_backward(runtime, &bwd, nullptr), FLASHGEN_ERROR_NO_DEVICE);
  expect_clear_message(flashgen_last_error());
  flashgen_runtime_destroy(runtime);
}

}  // namespace
}  // namespace flashgen::test
