// POSIX file access for the cache directory and its locks, by three rules that keep a
// planted or shared directory harmless:
//  - every open is relative to a directory descriptor and uses O_NOFOLLOW: no symbolic
//    link inside the cache is ever followed;
//  - a file or directory is trusted only when this user (or root) owns it and neither
//    group nor others may write it (ssh's rule for ~/.ssh), except in the kernel set a
//    package ships beside its library (Trust::package), which is trusted as that library is;
//  - a file is read only when it is regular (fstat after an O_NONBLOCK open, so a FIFO
//    never blocks) and no larger than a bound the caller gives.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flashgen {

// A file descriptor closed at scope exit.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Whose files are used: this user's (or root's) that nobody else can write, or the files of
// flashgen's own package (its kernel set, installed with the library that reads it: whoever
// may replace them may replace the library, so their owner and mode say nothing more; pip
// installs them with the installing user's umask). Links are never followed either way.
enum class Trust { owner, package };

// Why a file with status `st` is not trusted ("owned by uid 1001, not by you",
// "writable by group or others"); nullopt when it is.
std::optional<std::string> ownership_problem(const struct stat& st);

// lstat of `name` under `dir_fd`; false when it does not exist or cannot be examined.
bool stat_no_follow(int dir_fd, const std::string& name, struct stat& st);

// Opens the trusted directory `name` under `dir_fd` (AT_FDCWD: `name` is a path) without
// following a link in its last component. An invalid fd otherwise, with `problem` empty
// when it does not exist and saying why it is refused when it does.
UniqueFd open_directory(int dir_fd, const std::string& name, std::string& problem, Trust trust = Trust::owner);

// Reads the trusted regular file `name` under `dir_fd` when it has at most `max_bytes`.
// false with `problem` empty when it does not exist; false with `problem` saying why when
// it is a link, not regular, another user's, too large or unreadable.
bool read_regular_file(int dir_fd, const std::string& name, std::size_t max_bytes, std::string& out,
                       std::string& problem, Trust trust = Trust::owner);

// The names in directory `dir_fd` (not . and ..), sorted.
std::vector<std::string> directory_names(int dir_fd);

}  // namespace flashgen
