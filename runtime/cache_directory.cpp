#include "runtime/cache_directory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <sstream>

#include "flashgen/flashgen.hpp"
#include "runtime/kernel_json.h"

namespace flashgen {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSource = "kernel.cu";
constexpr const char* kCubin = "kernel.cubin";
constexpr const char* kMeta = "meta.json";

[[noreturn]] void io_error(const char* what, const fs::path& path, int err) {
  throw Error(Status::internal, fmt::format("kernel cache: {} {} failed: {}", what, path.string(), std::strerror(err)));
}

bool read_file(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  out = std::move(buffer).str();
  return !in.bad();
}

// Writes bytes to a new file and flushes them to the disk before returning.
void write_file_synced(const fs::path& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_error("creating", path, errno);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      io_error("writing", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    io_error("fsync of", path, err);
  }
  ::close(fd);
}

// Makes a rename inside `dir` durable.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A name no other thread or process uses for its temporary.
std::string unique_suffix() {
  static std::atomic<unsigned long> counter{0};
  return fmt::format("{}.{}", ::getpid(), counter++);
}

// <uri>-<key16>: [a-z0-9_]+ '-' 16 hex digits. `clear` removes only such directories,
// so a cache dir pointed at a shared place never loses anything else.
bool is_entry_name(std::string_view name) {
  constexpr size_t kKeyDigits = 16;
  if (name.size() < kKeyDigits + 2 || name[name.size() - kKeyDigits - 1] != '-') return false;
  const std::string_view uri = name.substr(0, name.size() - kKeyDigits - 1);
  const std::string_view key = name.substr(name.size() - kKeyDigits);
  const auto uri_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; };
  const auto hex_char = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return std::all_of(uri.begin(), uri.end(), uri_char) && std::all_of(key.begin(), key.end(), hex_char);
}

std::uintmax_t directory_bytes(const fs::path& dir) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec))
    if (f.is_regular_file(ec)) total += f.file_size(ec);
  return total;
}

// Checks a parsed meta.json against the expected key and the cubin on disk.
EntryState verify(const fs::path& dir, const std::string& key, CacheEntry& out, std::string& problem) {
  const std::string recorded_key = out.meta.value("key", "");
  if (recorded_key != key) {
    problem = fmt::format("{} records key '{}', expected '{}'", (dir / kMeta).string(), recorded_key, key);
    return EntryState::corrupt;
  }
  if (!read_file(dir / kCubin, out.cubin)) {
    problem = fmt::format("{} is missing or unreadable", (dir / kCubin).string());
    return EntryState::corrupt;
  }
  const auto expected_bytes = out.meta.value("cubin_bytes", std::uint64_t{0});
  if (out.cubin.size() != expected_bytes) {
    problem = fmt::format("{} has {} bytes, meta.json records {}", (dir / kCubin).string(), out.cubin.size(),
                          expected_bytes);
    return EntryState::corrupt;
  }
  const std::string expected_sum = out.meta.value("cubin_xxh3", "");
  const std::string actual_sum = checksum_hex(out.cubin);
  if (actual_sum != expected_sum) {
    problem = fmt::format("{} has checksum {}, meta.json records {}", (dir / kCubin).string(), actual_sum,
                          expected_sum);
    return EntryState::corrupt;
  }
  return EntryState::valid;
}

}  // namespace

std::optional<std::string> CacheDirectory::prepare_for_writing() const {
  std::error_code ec;
  for (const fs::path& dir : {root_, root_ / ".locks", root_ / ".tmp"}) {
    fs::create_directories(dir, ec);
    if (ec) return fmt::format("cannot create {}: {}", dir.string(), ec.message());
  }
  // Existing directories say nothing about write access: create and remove a probe file.
  const fs::path probe = root_ / ".tmp" / ("probe." + unique_suffix());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot create files in {}: {}", root_.string(), std::strerror(errno));
  ::close(fd);
  fs::remove(probe, ec);
  return std::nullopt;
}

FileLock CacheDirectory::lock(const std::string& name) const {
  std::error_code ec;
  fs::create_directories(root_ / ".locks", ec);
  return FileLock::acquire(lock_path(name));
}

EntryState CacheDirectory::read(const std::string& name, const std::string& key, CacheEntry& out,
                                std::string& problem) const {
  const fs::path dir = entry_path(name);
  std::string meta_text;
  if (!read_file(dir / kMeta, meta_text)) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return EntryState::missing;
    problem = fmt::format("{} is missing or unreadable", (dir / kMeta).string());
    return EntryState::corrupt;
  }
  out.meta = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (!out.meta.is_object()) {
    problem = fmt::format("{} is not valid JSON", (dir / kMeta).string());
    return EntryState::corrupt;
  }
  try {
    return verify(dir, key, out, problem);
  } catch (const nlohmann::json::exception& e) {
    problem = fmt::format("{} has a field of the wrong type: {}", (dir / kMeta).string(), e.what());
    return EntryState::corrupt;
  }
}

void CacheDirectory::write(const std::string& name, const std::string& source, const std::string& cubin,
                           const nlohmann::json& meta) const {
  const fs::path tmp = root_ / ".tmp" / (name + "." + unique_suffix());
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) io_error("creating", tmp, ec.value());
  try {
    write_file_synced(tmp / kSource, source);
    write_file_synced(tmp / kCubin, cubin);
    write_file_synced(tmp / kMeta, meta.dump(2) + "\n");
    sync_directory(tmp);

    const fs::path entry = entry_path(name);
    if (fs::exists(entry, ec)) {
      // A damaged entry being replaced: move it aside first (rename cannot replace a
      // non-empty directory), then swap the new one in.
      const fs::path old = root_ / ".tmp" / (name + ".old." + unique_suffix());
      if (::rename(entry.c_str(), old.c_str()) != 0 && errno != ENOENT) io_error("moving aside", entry, errno);
      fs::remove_all(old, ec);
    }
    if (::rename(tmp.c_str(), entry.c_str()) != 0) {
      // Someone else completed the entry between our check and rename (only possible
      // when `cache clear` removed the lock file meanwhile): theirs is as good as ours.
      if (errno != ENOTEMPTY && errno != EEXIST) io_error("renaming into place", entry, errno);
      fs::remove_all(tmp, ec);
    }
    sync_directory(root_);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

void CacheDirectory::write_file(const std::string& name, std::string_view bytes) const {
  const fs::path tmp = root_ / ".tmp" / (name + "." + unique_suffix());
  std::error_code ec;
  fs::create_directories(tmp.parent_path(), ec);
  if (ec) io_error("creating", tmp.parent_path(), ec.value());
  try {
    write_file_synced(tmp, bytes);
    const fs::path target = root_ / name;
    if (::rename(tmp.c_str(), target.c_str()) != 0) io_error("renaming into place", target, errno);
    sync_directory(root_);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

std::vector<EntryInfo> CacheDirectory::list() const {
  std::vector<EntryInfo> out;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(root_, ec)) {
    const std::string name = item.path().filename().string();
    if (!item.is_directory(ec) || !is_entry_name(name)) continue;
    EntryInfo info;
    info.name = name;
    info.path = item.path();
    info.bytes = directory_bytes(item.path());
    CacheEntry entry;
    std::string meta_text;
    std::string key;
    if (read_file(item.path() / kMeta, meta_text)) {
      const auto meta = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
      if (meta.is_object() && meta.contains("key") && meta["key"].is_string()) key = meta["key"];
    }
    info.state = read(name, key, entry, info.problem);
    info.meta = std::move(entry.meta);
    if (info.state == EntryState::missing) {
      info.state = EntryState::corrupt;
      info.problem = "entry vanished while listing";
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.name < b.name; });
  return out;
}

std::size_t CacheDirectory::clear() const {
  std::size_t removed = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(root_, ec)) {
    const std::string name = item.path().filename().string();
    if (item.is_directory(ec) && is_entry_name(name)) {
      fs::remove_all(item.path(), ec);
      if (ec) io_error("removing", item.path(), ec.value());
      ++removed;
    }
  }
  fs::remove_all(root_ / ".tmp", ec);
  fs::remove_all(root_ / ".locks", ec);
  return removed;
}

}  // namespace flashgen
