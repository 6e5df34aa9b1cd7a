#include "runtime/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "flashgen/flashgen.hpp"

namespace flashgen {

namespace {

int open_lock_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error(Status::internal, fmt::format("cannot open lock file {}: {}", path.string(), std::strerror(errno)));
  return fd;
}

// flock on this descriptor; false when `blocking` is off and another holder has it.
bool lock(int fd, bool blocking, const std::filesystem::path& path) {
  const int op = LOCK_EX | (blocking ? 0 : LOCK_NB);
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    if (!blocking && errno == EWOULDBLOCK) return false;
    const int err = errno;
    ::close(fd);
    throw Error(Status::internal, fmt::format("cannot lock {}: {}", path.string(), std::strerror(err)));
  }
  return true;
}

}  // namespace

FileLock FileLock::acquire(const std::filesystem::path& path) {
  const int fd = open_lock_file(path);
  lock(fd, true, path);
  return FileLock(fd);
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  const int fd = open_lock_file(path);
  if (!lock(fd, false, path)) {
    ::close(fd);
    return std::nullopt;
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace flashgen
