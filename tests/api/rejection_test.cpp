// Every rejection of rejection_cases.h, through the C++ Runtime and through the C API:
// the status and a message naming the argument, its value and what was expected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>

#include "rejection_cases.h"

namespace flashgen::test {

void PrintTo(const RejectionCase& c, std::ostream* os) { *os << c.name; }

namespace {

using ::testing::HasSubstr;

class RejectionTest : public ::testing::TestWithParam<RejectionCase> {
 protected:
  // A valid random call with the case's one thing broken; returns the expected message text.
  std::string broken_call(AttentionCall& call) {
    const Geometry g = GetParam().baseline == Baseline::cpu ? random_cpu_geometry(random_.rng)
                                                            : random_device_geometry(random_.rng);
    call = factory_.make(g);
    return GetParam().mutate(call);
  }

  RandomSource random_;
  CallFactory factory_;
};

// Runs `call` expecting an Error with the case's status and `expected` in its message.
template <typename Call>
void expect_rejected(Call&& call, Status status, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected " << to_string(status) << " with \"" << expected << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(expected));
  }
}

class ForwardRejection : public RejectionTest {};
class BackwardRejection : public RejectionTest {};

TEST_P(ForwardRejection, Cpp) {
  Runtime runtime;
  AttentionCall call;
  const std::string expected = broken_call(call);
  expect_rejected([&] { runtime.forward(call.forward()); }, GetParam().status, expected);
}

TEST_P(BackwardRejection, Cpp) {
  Runtime runtime;
  AttentionCall call;
  const std::string expected = broken_call(call);
  expect_rejected([&] { runtime.backward(call.backward()); }, GetParam().status, expected);
  expect_rejected([&] { runtime.backward_workspace_bytes(call.backward()); }, GetParam().status, expected);
}

class CRuntime {
 public:
  CRuntime() { EXPECT_EQ(flashgen_runtime_create(nullptr, &runtime_), FLASHGEN_OK) << flashgen_last_error(); }
  ~CRuntime() { flashgen_runtime_destroy(runtime_); }
  flashgen_runtime* get() const { return runtime_; }

 private:
  flashgen_runtime* runtime_ = nullptr;
};

TEST_P(ForwardRejection, C) {
  CRuntime runtime;
  AttentionCall call;
  const std::string expected = broken_call(call);
  const flashgen_forward_args args = to_c_forward(call);
  EXPECT_EQ(flashgen_forward(runtime.get(), &args, nullptr), static_cast<flashgen_status>(GetParam().status));
  EXPECT_THAT(flashgen_last_error(), HasSubstr(expected));
}

TEST_P(BackwardRejection, C) {
  CRuntime runtime;
  AttentionCall call;
  const std::string expected = broken_call(call);
  const flashgen_backward_args args = to_c_backward(call);
  const auto status = static_cast<flashgen_status>(GetParam().status);
  EXPECT_EQ(flashgen_backward(runtime.get(), &args, nullptr), status);
  EXPECT_THAT(flashgen_last_error(), HasSubstr(expected));
  std::size_t bytes = 12345;
  EXPECT_EQ(flashgen_backward_workspace_bytes(runtime.get(), &args, &bytes), status);
  EXPECT_THAT(flashgen_last_error(), HasSubstr(expected));
  EXPECT_EQ(bytes, 0u);
}

std::vector<RejectionCase> cases_of(unsigned pass) {
  std::vector<RejectionCase> out;
  for (const RejectionCase& c : rejection_cases())
    if (c.passes & pass) out.push_back(c);
  return out;
}

std::string case_name(const ::testing::TestParamInfo<RejectionCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Validation, ForwardRejection, ::testing::ValuesIn(cases_of(kForward)), case_name);
INSTANTIATE_TEST_SUITE_P(Validation, BackwardRejection, ::testing::ValuesIn(cases_of(kBackward)), case_name);

}  // namespace
}  // namespace flashgen::test
