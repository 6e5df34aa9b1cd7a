// Shared by the cache tests and the race helper: a tiny kernel generator (fast to
// compile, distinct per spec), scratch directories and scoped environment variables.
#pragma once

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "compiler/codegen.h"
#include "compiler/kernel_spec.h"

namespace flashgen::testing_support {

// A few-instruction kernel named by the spec's URI; its body depends on the spec,
// so different specs give different sources (and keys). `salt` changes the source alone.
inline GeneratedSource tiny_kernel(const KernelSpec& spec, int salt = 0) {
  const std::string name = spec.uri();
  return {name, fmt::format("// salt {}\nextern \"C\" __global__ void {}(float* out) {{\n"
                            "  out[threadIdx.x] = out[threadIdx.x] * {}.0f + {}.0f;\n}}\n",
                            salt, name, spec.head_dim, spec.block_m + spec.block_n)};
}

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "flashgen-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
    // Readable by every user: the read-only test reads it as another user.
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                            std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                            std::filesystem::perms::others_exec);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Sets (or unsets, with nullopt) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Runs `body` in a child process killed after `seconds`, so that code which would block
// (a FIFO, a held lock) fails the test instead of hanging it. The child reports failures
// on stderr and through its exit code; -1: it had to be killed.
inline int run_bounded(double seconds, const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bounded child threw: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The exit code of child `pid` (128 + signal when it was killed), once it has ended.
inline int exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `scenario` in a child process that cannot write `dir`: as root (who ignores
// permissions) the child becomes `nobody`, to whom the root-owned dir is read-only;
// otherwise the dir is chmod'ed a-w for the run. The child reports failures on stderr and
// through its exit code; 77: it could not become `nobody`.
inline int run_without_write_access(const std::filesystem::path& dir, const std::function<int()>& scenario) {
  namespace fs = std::filesystem;
  const bool root = geteuid() == 0;
  const auto set_write = [&](fs::perms which, fs::perm_options how) {
    for (const auto& p : fs::recursive_directory_iterator(dir)) fs::permissions(p, which, how);
    fs::permissions(dir, which, how);
  };
  const auto all_write = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
  if (!root) set_write(all_write, fs::perm_options::remove);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (root && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(77);
    _exit(scenario());
  }
  const int code = exit_code(pid);
  if (!root) set_write(fs::perms::owner_write, fs::perm_options::add);
  return code;
}

}  // namespace flashgen::testing_support
