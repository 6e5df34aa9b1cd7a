#include "runtime/cache_directory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include "flashgen/flashgen.hpp"
#include "runtime/cache_files.h"
#include "runtime/environment.h"
#include "runtime/kernel_json.h"

namespace flashgen {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSource = "kernel.cu";
constexpr const char* kCubin = "kernel.cubin";
constexpr const char* kMeta = "meta.json";
constexpr const char* kMarker = ".flashgen-entry";  // written first into every directory flashgen makes
// The files flashgen writes into an entry: clean-up removes these and nothing else.
constexpr std::array<std::string_view, 4> kEntryFiles = {kMarker, kSource, kCubin, kMeta};
// Every temporary in .tmp starts with this, so clean-up can tell them from other files.
constexpr std::string_view kTmpPrefix = "flashgen-tmp.";
constexpr std::size_t kMaxLockBytes = 4096;

[[noreturn]] void io_error(const char* what, const fs::path& path, int err) {
  throw Error(Status::internal, fmt::format("kernel cache: {} {} failed: {}", what, path.string(), std::strerror(err)));
}

bool owned_by_me(const struct stat& st) { return st.st_uid == ::geteuid(); }

// Writes bytes to a new file `name` of `dir_fd` and flushes them to the disk before returning.
void write_file_synced(int dir_fd, const std::string& name, std::string_view bytes, const fs::path& shown) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) io_error("creating", shown, errno);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("writing", shown, errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) io_error("fsync of", shown, errno);
}

// A name no other thread or process uses for its temporary.
std::string unique_suffix() {
  static std::atomic<unsigned long> counter{0};
  return fmt::format("{}.{}", ::getpid(), counter++);
}

// <uri>-<key16>: [a-z0-9_]+ '-' 16 hex digits. Only such names are looked at as entries.
bool is_entry_name(std::string_view name) {
  constexpr size_t kKeyDigits = 16;
  if (name.size() < kKeyDigits + 2 || name[name.size() - kKeyDigits - 1] != '-') return false;
  const std::string_view uri = name.substr(0, name.size() - kKeyDigits - 1);
  const std::string_view key = name.substr(name.size() - kKeyDigits);
  const auto uri_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; };
  const auto hex_char = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return std::all_of(uri.begin(), uri.end(), uri_char) && std::all_of(key.begin(), key.end(), hex_char);
}

std::uintmax_t directory_bytes(int dir_fd) {
  std::uintmax_t total = 0;
  for (const std::string& name : directory_names(dir_fd)) {
    struct stat st {};
    if (stat_no_follow(dir_fd, name, st) && S_ISREG(st.st_mode)) total += static_cast<std::uintmax_t>(st.st_size);
  }
  return total;
}

// Why meta.json does not name entry `name` ("uri" and "key" give <uri>-<key16>); "" when
// it does. This alone makes a directory recognisably flashgen's, for clean-up.
std::string naming_problem(const nlohmann::json& meta, const std::string& name) {
  const auto uri = meta.find("uri"), key = meta.find("key");
  if (uri == meta.end() || !uri->is_string()) return "field \"uri\" is missing or not a string";
  if (key == meta.end() || !key->is_string() || key->get_ref<const std::string&>().size() < 16)
    return "field \"key\" is missing or not a string of 32 hex digits";
  const std::string named = fmt::format("{}-{}", uri->get<std::string>(), key->get<std::string>().substr(0, 16));
  if (named != name) return fmt::format("it describes entry {}, not this one", named);
  return "";
}

// Why meta.json is not a valid record of entry `name` (with `key` when not empty): it must
// name the entry and have every field the runtime reads, with its type; "" when it is.
std::string meta_problem(const nlohmann::json& meta, const std::string& name, const std::string& key) {
  using json = nlohmann::json;
  if (std::string why = naming_problem(meta, name); !why.empty()) return why;
  if (!key.empty() && meta["key"] != key)
    return fmt::format("it records key '{}', expected '{}'", meta["key"].get<std::string>(), key);
  const auto resources_ok = [](const json& r) {
    return r.is_object() && std::all_of(r.begin(), r.end(), [](const json& v) {
             return v.is_number_unsigned() && v.get<std::uint64_t>() <= INT_MAX;
           });
  };
  struct Field {
    const char* name;
    bool (*ok)(const json&);
    const char* expected;
  };
  const Field fields[] = {
      {"kernel_name", [](const json& j) { return j.is_string(); }, "a string"},
      {"log", [](const json& j) { return j.is_string(); }, "a string"},
      {"compile_ms", [](const json& j) { return j.is_number(); }, "a number"},
      {"resources", resources_ok, "an object of integers in [0, 2^31)"},
      {"cubin_bytes", [](const json& j) { return j.is_number_unsigned(); }, "an unsigned integer"},
      {"cubin_xxh3", [](const json& j) { return j.is_string(); }, "a string"},
  };
  for (const Field& f : fields) {
    const auto it = meta.find(f.name);
    if (it == meta.end()) return fmt::format("field \"{}\" is missing", f.name);
    if (!f.ok(*it)) return fmt::format("field \"{}\" is {}, expected {}", f.name, it->dump(), f.expected);
  }
  return "";
}

// meta.json of the entry open as `entry_fd`, read and parsed; `problem` says why not.
bool read_meta(int entry_fd, nlohmann::json& meta, std::string& problem, Trust trust) {
  std::string text;
  if (!read_regular_file(entry_fd, kMeta, CacheDirectory::kMaxJsonBytes, text, problem, trust)) {
    if (problem.empty()) problem = "is missing";
    return false;
  }
  meta = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) {
    problem = "is not valid JSON";
    return false;
  }
  return true;
}

// Removes directory `name` of `parent_fd` when every file in it is one of kEntryFiles, a
// regular file of this user: nothing of anyone else's, nothing through a link. All or
// nothing. Returns why the directory was left alone.
std::optional<std::string> remove_own_directory(int parent_fd, const std::string& name) {
  std::string problem;
  const UniqueFd dir = open_directory(parent_fd, name, problem);
  if (!dir) return problem.empty() ? "vanished" : problem;
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0 || !owned_by_me(st)) return fmt::format("is owned by uid {}", st.st_uid);
  std::vector<std::string> own, foreign;
  for (const std::string& file : directory_names(dir.get())) {
    struct stat f {};
    const bool ours = std::find(kEntryFiles.begin(), kEntryFiles.end(), file) != kEntryFiles.end() &&
                      stat_no_follow(dir.get(), file, f) && S_ISREG(f.st_mode) && owned_by_me(f);
    (ours ? own : foreign).push_back(file);
  }
  if (!foreign.empty())
    return fmt::format("holds {} that flashgen did not write ({})",
                       foreign.size() == 1 ? "a file" : fmt::format("{} files", foreign.size()),
                       fmt::join(foreign.begin(), foreign.begin() + std::min<size_t>(foreign.size(), 3), ", "));
  for (const std::string& file : own)
    if (::unlinkat(dir.get(), file.c_str(), 0) != 0 && errno != ENOENT)
      return fmt::format("cannot remove {}: {}", file, std::strerror(errno));
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0)
    return fmt::format("cannot be removed: {}", std::strerror(errno));
  return std::nullopt;
}

// Subdirectory `name` of the root (created 0700 when `create`); throws Error naming it when refused.
UniqueFd subdirectory(int root_fd, const char* name, const fs::path& shown, bool create) {
  if (create && ::mkdirat(root_fd, name, 0700) != 0 && errno != EEXIST) io_error("creating", shown, errno);
  std::string problem;
  UniqueFd fd = open_directory(root_fd, name, problem);
  if (!fd && !problem.empty()) throw Error(Status::internal, fmt::format("kernel cache: {} {}", shown.string(), problem));
  return fd;
}


// The root directory, opened without following a link in its last component and checked.
UniqueFd open_root(const fs::path& root, std::string& problem, Trust trust = Trust::owner) {
  return open_directory(AT_FDCWD, root.string(), problem, trust);
}

// The root for modification; throws Error(internal) naming it when it is missing or refused.
UniqueFd checked_root(const fs::path& root) {
  std::string problem;
  UniqueFd fd = open_root(root, problem);
  if (!fd)
    throw Error(Status::internal, fmt::format("kernel cache directory {} {}", root.string(),
                                              problem.empty() ? "does not exist" : problem));
  return fd;
}

}  // namespace

CacheDirectory::CacheDirectory(fs::path root, Trust trust) : root_(std::move(root)), trust_(trust) {
  // "dir/" would make O_NOFOLLOW follow a link named dir: drop trailing separators.
  while (!root_.has_filename() && root_.has_parent_path() && root_ != root_.root_path()) root_ = root_.parent_path();
}

std::optional<std::string> CacheDirectory::root_problem() const {
  std::string problem;
  if (open_root(root_, problem, trust_) || problem.empty()) return std::nullopt;
  return fmt::format("cache directory {} {}", root_.string(), problem);
}

std::optional<std::string> CacheDirectory::prepare_for_writing() const {
  std::error_code ec;
  if (root_.has_parent_path()) fs::create_directories(root_.parent_path(), ec);  // ~/.cache: ordinary permissions
  // The root itself is private (the per-user fallback under $TMPDIR relies on it).
  if (::mkdir(root_.c_str(), 0700) != 0 && errno != EEXIST)
    return fmt::format("cannot create {}: {}", root_.string(), std::strerror(errno));
  try {
    const UniqueFd root = checked_root(root_);
    subdirectory(root.get(), ".locks", root_ / ".locks", true);
    const UniqueFd tmp = subdirectory(root.get(), ".tmp", root_ / ".tmp", true);
    // Existing directories say nothing about write access: create and remove a probe file.
    const std::string probe = fmt::format("{}probe.{}", kTmpPrefix, unique_suffix());
    const UniqueFd fd(::openat(tmp.get(), probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return fmt::format("cannot create files in {}: {}", root_.string(), std::strerror(errno));
    ::unlinkat(tmp.get(), probe.c_str(), 0);
  } catch (const Error& e) {
    return e.what();
  }
  return std::nullopt;
}

std::optional<FileLock> CacheDirectory::lock(const std::string& name, const LockRequest& request) const {
  const UniqueFd root = checked_root(root_);
  const UniqueFd locks = subdirectory(root.get(), ".locks", root_ / ".locks", true);
  return FileLock::acquire(locks.get(), name + ".lock", request, lock_path(name).string());
}

FileLock CacheDirectory::lock(const std::string& name) const {
  const auto timeout = cache_lock_timeout_from_env();
  std::string holder = "another process";
  auto held = lock(name, LockRequest{.purpose = "updating " + name,
                                     .timeout = timeout,
                                     .on_wait = [&](const std::string& h) { holder = h; }});
  if (!held)
    throw Error(Status::internal, fmt::format("{} is still held by {} after {:.1f} s (FLASHGEN_CACHE_LOCK_TIMEOUT)",
                                              lock_path(name).string(), holder, timeout.count() / 1000.0));
  return std::move(*held);
}

EntryState CacheDirectory::read(const std::string& name, const std::string& key, CacheEntry& out,
                                std::string& problem) const {
  const fs::path dir = entry_path(name);
  const UniqueFd root = open_root(root_, problem, trust_);
  if (!root) {
    if (problem.empty()) return EntryState::missing;
    problem = fmt::format("cache directory {} {}", root_.string(), problem);
    return EntryState::untrusted;
  }
  const UniqueFd entry = open_directory(root.get(), name, problem, trust_);
  if (!entry) {
    if (problem.empty()) return EntryState::missing;
    problem = fmt::format("{} {}", dir.string(), problem);
    return EntryState::untrusted;
  }
  const auto corrupt = [&](const char* file, const std::string& why) {
    problem = fmt::format("{} {}", (dir / file).string(), why);
    return EntryState::corrupt;
  };
  if (!read_meta(entry.get(), out.meta, problem, trust_)) return corrupt(kMeta, problem);
  if (std::string why = meta_problem(out.meta, name, key); !why.empty()) return corrupt(kMeta, why);
  // The types are checked: nothing below throws.
  out.kernel_name = out.meta["kernel_name"];
  out.log = out.meta["log"];
  out.compile_ms = out.meta["compile_ms"];
  out.resources = resources_from_json(out.meta["resources"]);

  if (!read_regular_file(entry.get(), kCubin, kMaxCubinBytes, out.cubin, problem, trust_))
    return corrupt(kCubin, problem.empty() ? "is missing" : problem);
  const auto expected_bytes = out.meta["cubin_bytes"].get<std::uint64_t>();
  if (out.cubin.size() != expected_bytes)
    return corrupt(kCubin, fmt::format("has {} bytes, meta.json records {}", out.cubin.size(), expected_bytes));
  const std::string expected_sum = out.meta["cubin_xxh3"];
  const std::string actual_sum = checksum_hex(out.cubin);
  if (actual_sum != expected_sum)
    return corrupt(kCubin, fmt::format("has checksum {}, meta.json records {}", actual_sum, expected_sum));
  return EntryState::valid;
}

void CacheDirectory::write(const std::string& name, const std::string& source, const std::string& cubin,
                           const nlohmann::json& meta) const {
  const UniqueFd root = checked_root(root_);
  const UniqueFd tmp = subdirectory(root.get(), ".tmp", root_ / ".tmp", true);
  const std::string building = fmt::format("{}{}.{}", kTmpPrefix, name, unique_suffix());
  const fs::path shown = root_ / ".tmp" / building;
  if (::mkdirat(tmp.get(), building.c_str(), 0755) != 0) io_error("creating", shown, errno);
  try {
    std::string problem;
    const UniqueFd dir = open_directory(tmp.get(), building, problem);
    if (!dir) throw Error(Status::internal, fmt::format("kernel cache: {} {}", shown.string(), problem));
    write_file_synced(dir.get(), kMarker, "", shown / kMarker);
    write_file_synced(dir.get(), kSource, source, shown / kSource);
    write_file_synced(dir.get(), kCubin, cubin, shown / kCubin);
    write_file_synced(dir.get(), kMeta, meta.dump(2) + "\n", shown / kMeta);
    ::fsync(dir.get());

    const fs::path entry = entry_path(name);
    struct stat st {};
    if (stat_no_follow(root.get(), name, st)) {
      // A damaged entry being replaced. Only a directory of ours or root's is moved, never
      // a link or another user's; rename cannot replace a non-empty directory, so it is
      // moved aside first and removed as far as it holds only flashgen's files (what is
      // left stays in .tmp, reported by `cache clear`).
      const UniqueFd damaged = open_directory(root.get(), name, problem);
      if (!damaged && !problem.empty())
        throw Error(Status::internal, fmt::format("kernel cache: {} {}: left alone", entry.string(), problem));
      const std::string old = fmt::format("{}{}.old.{}", kTmpPrefix, name, unique_suffix());
      if (::renameat(root.get(), name.c_str(), tmp.get(), old.c_str()) != 0 && errno != ENOENT)
        io_error("moving aside", entry, errno);
      remove_own_directory(tmp.get(), old);
    }
    if (::renameat(tmp.get(), building.c_str(), root.get(), name.c_str()) != 0) {
      // Someone else completed the entry between our check and rename (only possible
      // when `cache clear` removed the lock file meanwhile): theirs is as good as ours.
      if (errno != ENOTEMPTY && errno != EEXIST) io_error("renaming into place", entry, errno);
      remove_own_directory(tmp.get(), building);
    }
    ::fsync(root.get());
  } catch (...) {
    remove_own_directory(tmp.get(), building);
    throw;
  }
}

void CacheDirectory::write_file(const std::string& name, std::string_view bytes) const {
  const UniqueFd root = checked_root(root_);
  const UniqueFd tmp = subdirectory(root.get(), ".tmp", root_ / ".tmp", true);
  const std::string building = fmt::format("{}{}.{}", kTmpPrefix, name, unique_suffix());
  try {
    write_file_synced(tmp.get(), building, bytes, root_ / ".tmp" / building);
    if (::renameat(tmp.get(), building.c_str(), root.get(), name.c_str()) != 0)
      io_error("renaming into place", root_ / name, errno);
    ::fsync(root.get());
  } catch (...) {
    ::unlinkat(tmp.get(), building.c_str(), 0);
    throw;
  }
}

std::optional<std::string> CacheDirectory::read_file(const std::string& name, std::size_t max_bytes,
                                                     std::string& problem) const {
  const UniqueFd root = open_root(root_, problem, trust_);
  if (!root) {
    if (!problem.empty()) problem = fmt::format("cache directory {} {}", root_.string(), problem);
    return std::nullopt;
  }
  std::string bytes;
  if (!read_regular_file(root.get(), name, max_bytes, bytes, problem)) {
    if (!problem.empty()) problem = fmt::format("{} {}", (root_ / name).string(), problem);
    return std::nullopt;
  }
  return bytes;
}

std::vector<EntryInfo> CacheDirectory::list() const {
  std::vector<EntryInfo> out;
  std::string problem;
  const UniqueFd root = open_root(root_, problem, trust_);
  if (!root) {
    if (problem.empty()) return out;
    throw Error(Status::invalid_argument, fmt::format("refusing to use cache directory {}: it {}", root_.string(), problem));
  }
  for (const std::string& name : directory_names(root.get())) {
    if (!is_entry_name(name)) continue;
    EntryInfo info;
    info.name = name;
    info.path = entry_path(name);
    std::string ignored;
    if (const UniqueFd entry = open_directory(root.get(), name, ignored, trust_))
      info.bytes = directory_bytes(entry.get());
    CacheEntry entry;
    info.state = read(name, /*key=*/"", entry, info.problem);
    if (info.state == EntryState::valid) info.meta = std::move(entry.meta);
    if (info.state == EntryState::missing) {
      info.state = EntryState::corrupt;
      info.problem = "entry vanished while listing";
    }
    out.push_back(std::move(info));
  }
  return out;
}

ClearReport CacheDirectory::clear() const {
  ClearReport report;
  std::string problem;
  const UniqueFd root = open_root(root_, problem);
  if (!root) {
    if (problem.empty()) return report;
    throw Error(Status::invalid_argument, fmt::format("refusing to clear {}: it {}", root_.string(), problem));
  }
  const auto skip = [&](std::string path, std::string why) { report.skipped.emplace_back(std::move(path), std::move(why)); };

  // Entries: only directories whose meta.json parses and names them.
  for (const std::string& name : directory_names(root.get())) {
    if (!is_entry_name(name)) continue;  // not named like a kernel: not looked at, not reported
    const UniqueFd entry = open_directory(root.get(), name, problem);
    if (!entry) {
      if (!problem.empty()) skip(name, problem);
      continue;
    }
    nlohmann::json meta;
    if (!read_meta(entry.get(), meta, problem, Trust::owner)) {
      skip(name, fmt::format("meta.json {}: not recognisably flashgen's", problem));
      continue;
    }
    const std::string why = naming_problem(meta, name);
    if (!why.empty()) {
      skip(name, fmt::format("meta.json: {}: not recognisably flashgen's", why));
      continue;
    }
    if (auto left = remove_own_directory(root.get(), name)) {
      skip(name, *left);
      continue;
    }
    report.removed.push_back(name);
    ++report.entries;
  }

  // Temporaries: flashgen's prefix, and (directories) its marker or nothing inside.
  if (const UniqueFd tmp = open_directory(root.get(), ".tmp", problem)) {
    for (const std::string& name : directory_names(tmp.get())) {
      const std::string shown = ".tmp/" + name;
      struct stat st {};
      if (!std::string_view(name).starts_with(kTmpPrefix)) {
        skip(shown, "not created by flashgen");
      } else if (!stat_no_follow(tmp.get(), name, st)) {
        continue;  // vanished
      } else if (S_ISREG(st.st_mode) && owned_by_me(st)) {
        if (::unlinkat(tmp.get(), name.c_str(), 0) == 0) report.removed.push_back(shown);
      } else if (!S_ISDIR(st.st_mode)) {
        skip(shown, S_ISLNK(st.st_mode) ? "is a symbolic link (not followed)" : "is not flashgen's");
      } else {
        const UniqueFd dir = open_directory(tmp.get(), name, problem);
        struct stat marker {};
        if (dir && !stat_no_follow(dir.get(), kMarker, marker) && !directory_names(dir.get()).empty()) {
          skip(shown, fmt::format("has no {} marker: not flashgen's", kMarker));
        } else if (auto left = remove_own_directory(tmp.get(), name)) {
          skip(shown, *left);
        } else {
          report.removed.push_back(shown);
        }
      }
    }
  } else if (!problem.empty()) {
    skip(".tmp", problem);
  }

  // Locks: flashgen's lock files (empty or holding its note) of this user, not in use.
  if (const UniqueFd locks = open_directory(root.get(), ".locks", problem)) {
    for (const std::string& name : directory_names(locks.get())) {
      const std::string shown = ".locks/" + name;
      std::string text;
      struct stat st {};
      if (!std::string_view(name).ends_with(".lock")) {
        skip(shown, "not a flashgen lock file");
      } else if (!read_regular_file(locks.get(), name, kMaxLockBytes, text, problem)) {
        if (!problem.empty()) skip(shown, problem);
      } else if (!FileLock::holder_in(text)) {
        skip(shown, "does not hold what flashgen writes into a lock: not flashgen's");
      } else if (!stat_no_follow(locks.get(), name, st) || !owned_by_me(st)) {
        skip(shown, fmt::format("is owned by uid {}", st.st_uid));
      } else {
        try {
          // Unlinked while held, so no process locks the old file afterwards (FileLock
          // re-checks the name after locking).
          const auto held =
              FileLock::acquire(locks.get(), name,
                                LockRequest{.purpose = "clearing the cache", .timeout = std::chrono::milliseconds(0)},
                                (root_ / shown).string());
          if (!held) {
            const std::string holder = *FileLock::holder_in(text);
            skip(shown, fmt::format("in use by {}", holder.empty() ? "another process" : holder));
          } else if (::unlinkat(locks.get(), name.c_str(), 0) == 0) {
            report.removed.push_back(shown);
          }
        } catch (const Error& e) {
          skip(shown, e.what());
        }
      }
    }
  } else if (!problem.empty()) {
    skip(".locks", problem);
  }
  return report;
}

}  // namespace flashgen
