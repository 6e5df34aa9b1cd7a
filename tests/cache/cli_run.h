// `flashgen` run as a process by the cache tests (FLASHGEN_CLI: the program's path).
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/cache/cache_test_support.h"

namespace flashgen::testing_support {

struct CliRun {
  int status = -1;     // 124: killed by `timeout`
  std::string output;  // stdout and stderr
};

// `env flashgen args`, bounded by coreutils' timeout so a hang fails instead of blocking.
inline CliRun flashgen(const std::string& env, const std::string& args, int timeout_s = 60) {
  ScratchDir scratch;
  const std::filesystem::path out = scratch.path() / "output";
  const std::string command = fmt::format("env {} timeout {} '{}' {} >'{}' 2>&1 </dev/null", env, timeout_s,
                                          FLASHGEN_CLI, args, out.string());
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_bytes(out)};
}

}  // namespace flashgen::testing_support
