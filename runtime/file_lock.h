// An exclusive cross-process lock on a file (flock). The kernel drops a flock when
// the last descriptor of its holder closes, including when the holder dies
// (crash, SIGKILL): a dead owner's lock is broken by the OS, never by guessing
// from timestamps or PIDs. Lock files are never deleted while in use.
#pragma once

#include <filesystem>
#include <optional>

namespace flashgen {

class FileLock {
 public:
  // Blocks until this process holds the lock on `path` (created if missing).
  // Throws Error(internal) naming the path when the file cannot be opened.
  static FileLock acquire(const std::filesystem::path& path);
  // The lock if it is free now, else nullopt.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace flashgen
