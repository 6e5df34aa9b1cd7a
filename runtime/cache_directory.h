// The on-disk half of the kernel cache: a directory shared by processes.
//
//   <root>/<uri>-<key16>/kernel.cu     the generated source
//                        kernel.cubin  NVRTC's output
//                        meta.json     spec, resources, NVRTC version, compile ms, cubin size + XXH3
//                        .flashgen-entry  empty: "flashgen made this directory"
//   <root>/.locks/<uri>-<key16>.lock   flock'ed by the process compiling that entry
//   <root>/.tmp/flashgen-tmp.*         entries under construction (renamed into place when complete)
//
// An entry appears all at once (written in .tmp, fsync'ed, renamed), so a reader
// sees either nothing or a complete entry; read() still verifies the cubin against
// meta.json and reports damage instead of returning it.
//
// The directory may be shared or planted, so nothing in it is taken on trust
// (runtime/cache_files.h): no link is followed, only this user's (or root's) files that
// nobody else can write are used, files are read only when regular and of a sane size,
// and clean-up removes only what flashgen recognises as its own. A package's kernel set
// (Trust::package) is read with its library's trust instead: links are still refused and
// every entry verified.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/cache_files.h"  // Trust
#include "runtime/file_lock.h"
#include "runtime/nvrtc_compiler.h"  // KernelResources

namespace flashgen {

struct CacheEntry {
  std::string cubin;
  nlohmann::json meta;
  // The fields of meta.json the runtime uses, type-checked by read().
  std::string kernel_name;
  std::string log;
  KernelResources resources;
  double compile_ms = 0;
};

// What read() found:
//   corrupt    flashgen's entry, damaged (meta.json, a field's type, the cubin): recompiled
//              and replaced;
//   untrusted  a link, not a directory, another user's or writable by others: never read
//              and never replaced (its kernel is compiled in memory).
enum class EntryState { missing, corrupt, untrusted, valid };

struct EntryInfo {
  std::string name;
  std::filesystem::path path;
  std::uintmax_t bytes = 0;  // all files of the entry
  EntryState state = EntryState::missing;
  std::string problem;  // why it is corrupt or untrusted
  nlohmann::json meta;  // null when unreadable
};

// What clear() did, paths relative to the root.
struct ClearReport {
  std::size_t entries = 0;  // kernels removed
  std::vector<std::string> removed;
  std::vector<std::pair<std::string, std::string>> skipped;  // path, why it was left alone
};

class CacheDirectory {
 public:
  // Larger files are damaged, never read whole (a link to /dev/zero, a runaway write).
  static constexpr std::size_t kMaxCubinBytes = std::size_t{64} << 20;
  static constexpr std::size_t kMaxJsonBytes = std::size_t{1} << 20;

  // Trust::package: a kernel set shipped with flashgen's package (runtime/cache_files.h),
  // only ever read.
  explicit CacheDirectory(std::filesystem::path root, Trust trust = Trust::owner);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path entry_path(const std::string& name) const { return root_ / name; }
  std::filesystem::path lock_path(const std::string& name) const { return root_ / ".locks" / (name + ".lock"); }

  // Why the directory must not be used at all (a symbolic link, not a directory, another
  // user's, writable by others), naming it; nullopt when it is fine or does not exist yet.
  std::optional<std::string> root_problem() const;

  // Creates the directory tree (a new root 0700) and checks that files can be created in
  // it. Returns the reason when they cannot (refused root, read-only file system, permissions).
  std::optional<std::string> prepare_for_writing() const;

  // This process's hold on `name`'s cross-process lock (.locks/<name>.lock, recreating
  // .locks/ if needed); nullopt when another process still holds it after request.timeout.
  // Throws Error(internal) when the lock file cannot be opened or is not trusted.
  std::optional<FileLock> lock(const std::string& name, const LockRequest& request) const;
  // The same, waiting up to FLASHGEN_CACHE_LOCK_TIMEOUT; throws Error(internal) after it.
  FileLock lock(const std::string& name) const;

  // Reads and verifies entry `name`: the one test of "is this entry valid" that the
  // runtime, `cache ls` and `cache stats` share. meta.json parses, names this entry,
  // records `key` (when not empty), has every field the runtime uses with its type, and
  // the cubin's size and checksum match. `problem` receives the reason for anything but valid.
  EntryState read(const std::string& name, const std::string& key, CacheEntry& out, std::string& problem) const;

  // Atomically creates (or replaces) entry `name`. The caller holds the entry's lock.
  // Throws Error(internal) naming the path on an I/O failure.
  void write(const std::string& name, const std::string& source, const std::string& cubin,
             const nlohmann::json& meta) const;

  // Atomically replaces the plain file <root>/<name> (written in .tmp, fsync'ed, renamed),
  // for files beside the entries such as the autotune winners. Readers see the old or
  // the new file, never a part. Throws Error(internal) naming the path on an I/O failure.
  void write_file(const std::string& name, std::string_view bytes) const;

  // The plain file <root>/<name> when it is a trusted regular file of at most `max_bytes`;
  // nullopt with `problem` empty when it does not exist, with the reason when it is refused.
  std::optional<std::string> read_file(const std::string& name, std::size_t max_bytes, std::string& problem) const;

  // Every entry (a directory named like one), sorted by name, each verified by read().
  // Throws Error(invalid_argument) when root_problem() refuses the directory.
  std::vector<EntryInfo> list() const;
  // Removes what flashgen recognises as its own: entries whose meta.json names them,
  // temporaries with its prefix and marker, its lock files not in use, all of this
  // user and holding none of another's files. Everything else is left and reported.
  // Throws Error(invalid_argument) when root_problem() refuses the directory.
  ClearReport clear() const;

 private:
  std::filesystem::path root_;
  Trust trust_ = Trust::owner;
};

}  // namespace flashgen
