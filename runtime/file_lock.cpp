#include "runtime/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "flashgen/flashgen.hpp"
#include "runtime/cache_files.h"

namespace flashgen {

namespace {

constexpr std::string_view kNotePrefix = "flashgen lock: ";

[[noreturn]] void lock_error(const std::string& shown_as, const std::string& why) {
  throw Error(Status::internal, fmt::format("lock file {} {}", shown_as, why));
}

// Opens (creating) the lock file without following a link, and checks what it is.
UniqueFd open_lock_file(int dir_fd, const std::string& name, const std::string& shown_as, struct stat& st) {
  // O_NONBLOCK: a FIFO planted under the name must not block the open.
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!fd) {
    const int err = errno;
    lock_error(shown_as, err == ELOOP ? "is a symbolic link (not followed)"
                                      : fmt::format("cannot be opened: {}", std::strerror(err)));
  }
  if (::fstat(fd.get(), &st) != 0) lock_error(shown_as, fmt::format("cannot be examined: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) lock_error(shown_as, "is not a regular file");
  if (auto why = ownership_problem(st)) lock_error(shown_as, "is " + *why);
  return fd;
}

// The holder's note, read through our own descriptor of the file.
std::string read_holder(int fd) {
  char text[256];
  const ssize_t n = ::pread(fd, text, sizeof text, 0);
  const auto holder = FileLock::holder_in(std::string_view(text, n > 0 ? static_cast<size_t>(n) : 0));
  return holder && !holder->empty() ? *holder : "another process";
}

void write_note(int fd, const std::string& purpose) {
  const std::string note = fmt::format("{}process {} {}\n", kNotePrefix, ::getpid(), purpose);
  // Best effort: the note only improves a waiter's message.
  if (::ftruncate(fd, 0) != 0) return;
  [[maybe_unused]] const ssize_t written = ::pwrite(fd, note.data(), note.size(), 0);
}

}  // namespace

std::optional<FileLock> FileLock::acquire(int dir_fd, const std::string& name, const LockRequest& request,
                                          const std::string& shown_as) {
  using Clock = std::chrono::steady_clock;
  const bool forever = request.timeout == std::chrono::milliseconds::max();
  const Clock::time_point deadline = forever ? Clock::time_point::max() : Clock::now() + request.timeout;
  auto pause = std::chrono::milliseconds(5);
  bool told = false;
  for (;;) {
    struct stat opened {};
    UniqueFd fd = open_lock_file(dir_fd, name, shown_as, opened);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      // `cache clear` unlinks free lock files: if ours was unlinked between open and
      // flock, we hold a lock nobody else will see. Lock the file now under the name.
      struct stat now {};
      if (!stat_no_follow(dir_fd, name, now) || now.st_ino != opened.st_ino || now.st_dev != opened.st_dev) continue;
      write_note(fd.get(), request.purpose);
      return FileLock(std::move(fd));
    }
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) lock_error(shown_as, fmt::format("cannot be locked: {}", std::strerror(errno)));
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return std::nullopt;
    if (!told && request.on_wait) request.on_wait(read_holder(fd.get()));
    told = true;
    // Polling (not a blocking flock) keeps the wait bounded; the file is reopened each
    // round in case `cache clear` replaced it.
    std::this_thread::sleep_for(forever ? pause : std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

namespace {

UniqueFd open_parent(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) lock_error(path.string(), fmt::format("has no usable directory: {}", std::strerror(errno)));
  return dir;
}

}  // namespace

FileLock FileLock::acquire(const std::filesystem::path& path) {
  const UniqueFd dir = open_parent(path);
  return *acquire(dir.get(), path.filename().string(), LockRequest{.purpose = "holding it"}, path.string());
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  const UniqueFd dir = open_parent(path);
  return acquire(dir.get(), path.filename().string(),
                 LockRequest{.purpose = "holding it", .timeout = std::chrono::milliseconds(0)}, path.string());
}

std::optional<std::string> FileLock::holder_in(std::string_view lock_text) {
  if (lock_text.empty()) return std::string();
  if (!lock_text.starts_with(kNotePrefix)) return std::nullopt;
  lock_text.remove_prefix(kNotePrefix.size());
  return std::string(lock_text.substr(0, lock_text.find('\n')));
}

}  // namespace flashgen
