// The `flashgen bench` program itself, run as a process: bad flags fail with a clear
// message naming the flag, and without a GPU it fails with one line saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "runtime/cuda_driver.h"

namespace flashgen::test {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Outcome run_flashgen(const std::string& arguments) {
  const std::string command = std::string(FLASHGEN_CLI) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return {};
  }
  Outcome outcome;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) outcome.output += buffer;
  const int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

int lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

TEST(BenchCli, BadSeqlenIsRejectedNamingIt) {
  const Outcome r = run_flashgen("bench --head-dims 128 --seqlens 1k,12x");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("--seqlens: got '12x', expected a positive length"));
  EXPECT_EQ(lines(r.output), 1) << r.output;
}

TEST(BenchCli, UnknownDtypeIsRejectedNamingIt) {
  const Outcome r = run_flashgen("bench --dtype fp8");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("--dtype"));
  EXPECT_THAT(r.output, ::testing::HasSubstr("fp8"));
}

TEST(BenchCli, BadPassAndWindowAreRejected) {
  Outcome r = run_flashgen("bench --passes fwd,sideways");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("sideways"));
  r = run_flashgen("bench --window 1,2,3");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("--window"));
  r = run_flashgen("bench --heads 12 --heads-kv 5");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("--heads-kv: got 5"));
}

TEST(BenchCli, WithoutAGpuFailsWithOneClearLine) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present: this test is for machines without one";
  const Outcome r = run_flashgen("bench --head-dims 128 --seqlens 4k --causal both");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("no device: flashgen bench needs a CUDA GPU (device 0)"));
}

}  // namespace
}  // namespace flashgen::test
