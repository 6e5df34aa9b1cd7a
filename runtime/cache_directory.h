// The on-disk half of the kernel cache: a directory shared by processes.
//
//   <root>/<uri>-<key16>/kernel.cu     the generated source
//                        kernel.cubin  NVRTC's output
//                        meta.json     spec, resources, NVRTC version, compile ms, cubin size + XXH3
//   <root>/.locks/<uri>-<key16>.lock   flock'ed by the process compiling that entry
//   <root>/.tmp/                       entries under construction (renamed into place when complete)
//
// An entry appears all at once (written in .tmp, fsync'ed, renamed), so a reader
// sees either nothing or a complete entry; read() still verifies the cubin against
// meta.json and reports damage instead of returning it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/file_lock.h"

namespace flashgen {

struct CacheEntry {
  std::string cubin;
  nlohmann::json meta;
};

// What read() found.
enum class EntryState { missing, corrupt, valid };

struct EntryInfo {
  std::string name;
  std::filesystem::path path;
  std::uintmax_t bytes = 0;  // all files of the entry
  EntryState state = EntryState::missing;
  std::string problem;  // why it is corrupt
  nlohmann::json meta;  // null when unreadable
};

class CacheDirectory {
 public:
  explicit CacheDirectory(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path entry_path(const std::string& name) const { return root_ / name; }
  std::filesystem::path lock_path(const std::string& name) const { return root_ / ".locks" / (name + ".lock"); }

  // Creates the directory tree and checks that files can be created in it.
  // Returns the reason when they cannot (read-only file system, permissions).
  std::optional<std::string> prepare_for_writing() const;

  // Blocks until this process holds entry `name`'s cross-process lock (recreating
  // .locks/ if `clear` removed it). Throws Error(internal) when the lock file cannot be opened.
  FileLock lock(const std::string& name) const;

  // Reads and verifies entry `name`: meta.json parses, records `key`, and the cubin's
  // size and checksum match. `problem` receives the reason for `corrupt`.
  EntryState read(const std::string& name, const std::string& key, CacheEntry& out, std::string& problem) const;

  // Atomically creates (or replaces) entry `name`. The caller holds the entry's lock.
  // Throws Error(internal) naming the path on an I/O failure.
  void write(const std::string& name, const std::string& source, const std::string& cubin,
             const nlohmann::json& meta) const;

  // Atomically replaces the plain file <root>/<name> (written in .tmp, fsync'ed, renamed),
  // for files beside the entries such as the autotune winners. Readers see the old or
  // the new file, never a part. Throws Error(internal) naming the path on an I/O failure.
  void write_file(const std::string& name, std::string_view bytes) const;

  // Every entry, sorted by name, each verified against its own meta.json.
  std::vector<EntryInfo> list() const;
  // Removes every entry, lock and temporary; returns the number of entries removed.
  std::size_t clear() const;

 private:
  std::filesystem::path root_;
};

}  // namespace flashgen
