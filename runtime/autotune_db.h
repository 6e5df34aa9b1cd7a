// The persisted autotune winners: one JSON file beside the kernel cache entries,
//
//   <cache dir>/autotune.json
//   { "format": 1,
//     "devices": { "<gpu>|<SMs>sm|driver <v>|nvrtc <v>|flashgen <v>": {
//         "gpu": ..., "sm_count": ..., "driver_version": ..., "nvrtc_version": ..., "flashgen_version": ...,
//         "entries": { "<TuningKey::name()>": {
//             "candidate_set": "<CandidateSet::hash>", "kernels": [<spec>, ...],
//             "median_ms": ..., "heuristic_ms": ..., "candidates": ..., "failed": ..., "tuned_at": ... } } } } }
//
// A winner is used only by the same device identity and only while its candidate set
// hashes the same, so changing one set (or the GPU, driver, NVRTC or flashgen) retunes
// exactly what changed. Writers take <cache dir>/.locks/autotune.json.lock, re-read the
// file, merge their entries and replace it atomically: concurrent tuners lose nothing,
// readers never see a partial file. A damaged file is ignored with a warning and
// rewritten by the next store.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/tuning_candidates.h"
#include "flashgen/flashgen.hpp"

namespace flashgen {

// What a winner was measured on. Any difference makes it another device's winner.
struct DeviceIdentity {
  std::string gpu_name;
  int sm_count = 0;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  std::string nvrtc_version;
  std::string flashgen_version = version();

  std::string key() const;
  bool operator==(const DeviceIdentity&) const = default;
};

// A device as tuning sees it (query_device_profile in runtime/autotune_gpu.h; from the
// file: TuningDb::tuned_device).
struct DeviceProfile {
  DeviceIdentity identity;
  DeviceLimits limits;
  Arch arch = Arch::sm_80;
};

struct TunedEntry {
  std::string candidate_set;  // CandidateSet::hash the winner was chosen from
  Candidate kernels;          // the winner
  double median_ms = 0;       // the winner's time
  double heuristic_ms = 0;    // the heuristic default's time (+inf: it failed)
  int candidates = 0;
  int failed = 0;
};

class TuningDb {
 public:
  static constexpr const char* kFileName = "autotune.json";

  // Reads <dir>/autotune.json (missing: empty). `log` receives the damaged-file warning.
  TuningDb(std::filesystem::path dir, LogSink log);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path() const { return dir_ / kFileName; }

  // The winner for `key` on `device` tuned from the set hashing `set_hash`; nullopt when
  // there is none, it came from another set, or it no longer names valid kernels for the key.
  std::optional<TunedEntry> find(const DeviceIdentity& device, const TuningKey& key, const std::string& set_hash) const;

  // Adds or replaces entries: in memory, then in the file (lock, re-read, merge, atomic
  // replace). The device's arch and limits are recorded beside its identity, for readers
  // away from the GPU. An unwritable directory keeps them in memory and warns; nothing throws.
  void store(const DeviceProfile& device, const std::vector<std::pair<TuningKey, TunedEntry>>& entries);

  // The device of the file whose winners serve `arch` away from the GPU (the MLIR pass,
  // `flashgen dump`), among those tuned by this flashgen and NVRTC: the one `device` names
  // (its GPU name, or its full key(), which matches any versions), else the sole one with
  // winners for `arch`; nullopt when there is none. Throws Error(invalid_argument) naming
  // `option` when `device` names no device or several, or when several qualify unnamed.
  std::optional<DeviceProfile> tuned_device(Arch arch, std::string_view device, std::string_view option) const;

  // Entries of the file's device (for listings); empty if none.
  nlohmann::json entries(const DeviceIdentity& device) const;

 private:
  std::filesystem::path dir_;
  LogSink log_;
  mutable std::mutex mutex_;
  nlohmann::json doc_;
};

// JSON forms, exposed for tests.
nlohmann::json tuned_entry_to_json(const TunedEntry& e);
// nullopt (with `problem` set) when the JSON does not describe valid kernels for `key`.
std::optional<TunedEntry> tuned_entry_from_json(const nlohmann::json& j, const TuningKey& key, std::string& problem);

}  // namespace flashgen
