// An exclusive cross-process lock on a file (flock). The kernel drops a flock when
// the last descriptor of its holder closes, including when the holder dies
// (crash, SIGKILL): a dead owner's lock is broken by the OS, never by guessing
// from timestamps or PIDs. The holder writes "flashgen lock: process N <purpose>" into
// the file, so a waiter can say whom it waits for. Lock files are opened with O_NOFOLLOW
// under their directory's descriptor and used only when regular and trusted
// (runtime/cache_files.h).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/cache_files.h"

namespace flashgen {

struct LockRequest {
  std::string purpose{};  // what the holder does ("compiling fwd_..."), written for waiters
  // How long to wait while another process holds the lock; max(): as long as it takes.
  std::chrono::milliseconds timeout = std::chrono::milliseconds::max();
  // Called once, with the holder ("process 42 compiling fwd_..."), when the lock is taken.
  std::function<void(const std::string& holder)> on_wait{};
};

class FileLock {
 public:
  // The lock on file `name` of directory `dir_fd`, created (0600) if missing. nullopt when
  // another process still holds it after `request.timeout`. Throws Error(internal) naming
  // `shown_as` when the file cannot be opened or is a link, not regular or not trusted.
  static std::optional<FileLock> acquire(int dir_fd, const std::string& name, const LockRequest& request,
                                         const std::string& shown_as);
  // By path (its directory opened as given): waits as long as it takes, or not at all.
  static FileLock acquire(const std::filesystem::path& path);
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path);

  // The holder a lock file's text names ("process 42 compiling fwd_..."); "" for an empty
  // file (created, not yet written); nullopt when the text is not one flashgen writes.
  static std::optional<std::string> holder_in(std::string_view lock_text);

  // Movable, not copyable; closing the descriptor (with the last owner) releases the flock.
 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace flashgen
