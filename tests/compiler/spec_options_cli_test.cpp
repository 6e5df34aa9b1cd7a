// `flashgen dump`'s spec options (tools/flashgen/spec_options.cpp) run as a process: the
// options the table names give back the spec, and bad values are rejected naming the option.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "compiler/mlir_text.h"
#include "compiler/spec_fields.h"
#include "tests/compiler/spec_samples.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun dump(const std::string& args) {
  CliRun r;
  FILE* pipe = ::popen(fmt::format("'{}' dump {} 2>&1", FLASHGEN_CLI, args).c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// A value for the flags whose option takes their launch parameter (--window L,R, --softcap CAP).
std::string launch_value(std::string_view form) { return form == "L,R" ? " 2,2" : " 30"; }

// The options that name every field of `s`.
std::string options_for(const KernelSpec& s) {
  std::string args;
  for_each_spec_field([&](const auto& field) {
    const auto value = s.*field.member;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
      if (value) args += fmt::format(" {}{}", field.cli, field.cli_value ? launch_value(field.cli_value) : "");
    } else {
      args += fmt::format(" {} {}", field.cli, field_text(value));
    }
  });
  return args;
}

TEST(SpecOptionsCli, TheTableOptionsGiveTheSpecBack) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 8; ++i) {
    const KernelSpec s = testing_support::random_valid_spec(rng);
    const std::string args = "--emit mlir" + options_for(s);
    const CliRun r = dump(args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output, mlir_module({s})) << args;
  }
}

TEST(SpecOptionsCli, BadValuesNameTheOption) {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--block-m 6x4", "--block-m: got '6x4', expected an integer"},
           {"--dtype fp8", "--dtype: got 'fp8', expected fp16 or bf16"},
           {"--arch sm_70", "--arch: got 'sm_70', expected sm_80, sm_86, sm_89, sm_90 or sm_90a"},
           {"--pass bwd",
            "--pass: got 'bwd', expected fwd, bwd_preprocess, bwd_dkdv, bwd_dq, bwd_dq_convert, fwd_splitkv, fwd_combine or kv_append, or "
            "all"},
           {"--softcap 0", "--softcap: got '0', expected a finite value > 0"},
           {"--window 1", "--window: got '1', expected L,R"},
       }) {
    const CliRun r = dump("--emit mlir " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace flashgen
