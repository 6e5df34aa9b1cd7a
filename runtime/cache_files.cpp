#include "runtime/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace flashgen {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> ownership_problem(const struct stat& st) {
  // root may own what a user trusts: root could replace the user's files anyway.
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return fmt::format("owned by uid {}, not by this user (uid {})", st.st_uid, ::geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("writable by group or others (mode {:o}; chmod go-w to use it)", st.st_mode & 07777);
  return std::nullopt;
}

bool stat_no_follow(int dir_fd, const std::string& name, struct stat& st) {
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

namespace {

// Why an O_NOFOLLOW open of `name` failed with `err`; empty when it does not exist.
std::string open_problem(int dir_fd, const std::string& name, int err, const char* expected) {
  if (err == ENOENT) return "";
  if (err == ELOOP || err == ENOTDIR) {
    struct stat st {};
    if (!stat_no_follow(dir_fd, name, st)) return "";  // a parent is not a directory: nothing there
    return S_ISLNK(st.st_mode) ? "is a symbolic link (not followed)" : fmt::format("is not a {}", expected);
  }
  return fmt::format("cannot be opened: {}", std::strerror(err));
}

const char* file_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

UniqueFd open_directory(int dir_fd, const std::string& name, std::string& problem, Trust trust) {
  problem.clear();
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    problem = open_problem(dir_fd, name, errno, "directory");
    return fd;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    problem = fmt::format("cannot be examined: {}", std::strerror(errno));
    return UniqueFd();
  }
  if (auto why = ownership_problem(st); why && trust == Trust::owner) {
    problem = "is " + *why;
    return UniqueFd();
  }
  return fd;
}

bool read_regular_file(int dir_fd, const std::string& name, std::size_t max_bytes, std::string& out,
                       std::string& problem, Trust trust) {
  problem.clear();
  out.clear();
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    problem = open_problem(dir_fd, name, errno, "regular file");
    return false;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    problem = fmt::format("cannot be examined: {}", std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    problem = fmt::format("is {}", file_type(st.st_mode));
    return false;
  }
  if (auto why = ownership_problem(st); why && trust == Trust::owner) {
    problem = "is " + *why;
    return false;
  }
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    problem = fmt::format("has {} bytes, more than the {} a cache file of its kind may have", st.st_size, max_bytes);
    return false;
  }
  // Until EOF, but never more than one byte past the bound: a file growing while it is
  // read (or a size fstat does not report) is damaged too.
  out.resize(static_cast<std::size_t>(std::min<std::uintmax_t>(st.st_size, max_bytes)) + 1);
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = fmt::format("cannot be read: {}", std::strerror(errno));
      return false;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done == out.size() && done <= max_bytes) out.resize(std::min(max_bytes + 1, 2 * done));
  }
  if (done > max_bytes) {
    problem = fmt::format("grew past the {} bytes a cache file of its kind may have", max_bytes);
    return false;
  }
  out.resize(done);
  return true;
}

std::vector<std::string> directory_names(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::dup(dir_fd);  // closedir closes the descriptor it was given
  if (fd < 0) return names;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return names;
  }
  ::rewinddir(dir);
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace flashgen
