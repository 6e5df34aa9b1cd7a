#include "runtime/autotune_db.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <limits>

#include "runtime/cache_directory.h"
#include "runtime/kernel_json.h"

namespace flashgen {

namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

nlohmann::json empty_doc() { return {{"format", kFormat}, {"devices", nlohmann::json::object()}}; }

// The file's document, or an empty one when it is missing; `problem` says why a present
// file was not usable.
nlohmann::json read_doc(const fs::path& path, std::string& problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return empty_doc();
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    problem = "not valid JSON";
    return empty_doc();
  }
  const auto format = doc.find("format");
  if (format == doc.end() || !format->is_number_integer() || format->get<int>() != kFormat) {
    problem = fmt::format("\"format\" is {}, expected {}", format == doc.end() ? "missing" : format->dump(), kFormat);
    return empty_doc();
  }
  const auto devices = doc.find("devices");
  if (devices == doc.end() || !devices->is_object()) {
    problem = "\"devices\" is missing or not an object";
    return empty_doc();
  }
  return doc;
}

nlohmann::json device_json(const DeviceIdentity& d) {
  return {{"gpu", d.gpu_name},
          {"sm_count", d.sm_count},
          {"driver_version", d.driver_version},
          {"nvrtc_version", d.nvrtc_version},
          {"flashgen_version", d.flashgen_version},
          {"entries", nlohmann::json::object()}};
}

// JSON has no infinity: a failed default is stored as null.
nlohmann::json time_json(double ms) { return std::isfinite(ms) ? nlohmann::json(ms) : nlohmann::json(nullptr); }
double time_from_json(const nlohmann::json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::infinity();
}

}  // namespace

std::string DeviceIdentity::key() const {
  return fmt::format("{}|{}sm|driver {}|nvrtc {}|flashgen {}", gpu_name, sm_count, driver_version, nvrtc_version,
                     flashgen_version);
}

nlohmann::json tuned_entry_to_json(const TunedEntry& e) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSpec& s : e.kernels) kernels.push_back(spec_to_json(s));
  return {{"candidate_set", e.candidate_set},
          {"kernels", kernels},
          {"median_ms", time_json(e.median_ms)},
          {"heuristic_ms", time_json(e.heuristic_ms)},
          {"candidates", e.candidates},
          {"failed", e.failed},
          {"tuned_at", fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)))}};
}

std::optional<TunedEntry> tuned_entry_from_json(const nlohmann::json& j, const TuningKey& key, std::string& problem) {
  try {
    TunedEntry e;
    e.candidate_set = j.at("candidate_set").get<std::string>();
    const nlohmann::json& kernels = j.at("kernels");
    // The winner differs from the key's default only in tiles: start from the default
    // and check that the result names the kernels recorded.
    e.kernels = heuristic_candidate(key);
    if (!kernels.is_array() || kernels.size() != e.kernels.size()) {
      problem = fmt::format("\"kernels\" should list {} kernels", e.kernels.size());
      return std::nullopt;
    }
    for (size_t i = 0; i < e.kernels.size(); ++i) {
      KernelSpec& s = e.kernels[i];
      const nlohmann::json& k = kernels[i];
      s.block_m = k.at("block_m").get<int>();
      s.block_n = k.at("block_n").get<int>();
      s.warps = k.at("warps").get<int>();
      s.stages = k.at("stages").get<int>();
      const std::string uri = k.at("uri").get<std::string>();
      if (uri != s.uri()) {
        problem = fmt::format("kernel {} is '{}', expected '{}'", i, uri, s.uri());
        return std::nullopt;
      }
      if (auto p = s.problems(); !p.empty()) {
        problem = fmt::format("kernel {}: {}", s.uri(), p.front());
        return std::nullopt;
      }
    }
    e.median_ms = time_from_json(j, "median_ms");
    e.heuristic_ms = time_from_json(j, "heuristic_ms");
    e.candidates = j.value("candidates", 0);
    e.failed = j.value("failed", 0);
    return e;
  } catch (const nlohmann::json::exception& ex) {
    problem = ex.what();
  } catch (const Error& ex) {
    problem = ex.what();
  }
  return std::nullopt;
}

TuningDb::TuningDb(fs::path dir, LogSink log) : dir_(std::move(dir)), log_(std::move(log)) {
  std::string problem;
  doc_ = read_doc(path(), problem);
  if (!problem.empty() && log_)
    log_(LogLevel::warning, fmt::format("autotune file {} is damaged ({}): ignoring it; the next tuning rewrites it",
                                        path().string(), problem));
}

std::optional<TunedEntry> TuningDb::find(const DeviceIdentity& device, const TuningKey& key,
                                         const std::string& set_hash) const {
  std::lock_guard lock(mutex_);
  const nlohmann::json& devices = doc_["devices"];
  const auto d = devices.find(device.key());
  if (d == devices.end() || !d->is_object()) return std::nullopt;
  const auto entries = d->find("entries");
  if (entries == d->end() || !entries->is_object()) return std::nullopt;
  const auto it = entries->find(key.name());
  if (it == entries->end()) return std::nullopt;
  std::string problem;
  std::optional<TunedEntry> e = tuned_entry_from_json(*it, key, problem);
  if (!e) {
    if (log_)
      log_(LogLevel::warning, fmt::format("autotune file {}: entry {} is unusable ({}); using the heuristic table",
                                          path().string(), key.name(), problem));
    return std::nullopt;
  }
  if (e->candidate_set != set_hash) return std::nullopt;  // tuned from another candidate set: stale
  return e;
}

nlohmann::json TuningDb::entries(const DeviceIdentity& device) const {
  std::lock_guard lock(mutex_);
  const nlohmann::json& devices = doc_["devices"];
  const auto d = devices.find(device.key());
  if (d == devices.end() || !d->is_object() || !d->contains("entries")) return nlohmann::json::object();
  return (*d)["entries"];
}

void TuningDb::store(const DeviceIdentity& device, const std::vector<std::pair<TuningKey, TunedEntry>>& entries) {
  std::lock_guard lock(mutex_);
  auto merge_into = [&](nlohmann::json& doc) {
    nlohmann::json& d = doc["devices"][device.key()];
    if (!d.is_object() || !d.contains("entries") || !d["entries"].is_object()) d = device_json(device);
    for (const auto& [key, entry] : entries) d["entries"][key.name()] = tuned_entry_to_json(entry);
  };
  merge_into(doc_);

  const CacheDirectory disk(dir_);
  try {
    if (auto why = disk.prepare_for_writing()) throw Error(Status::internal, *why);
    const FileLock file_lock = disk.lock(kFileName);
    // Another process may have stored entries since we read the file: merge into its version.
    std::string problem;
    nlohmann::json on_disk = read_doc(path(), problem);
    if (!problem.empty() && log_)
      log_(LogLevel::warning,
           fmt::format("autotune file {} is damaged ({}): replacing it", path().string(), problem));
    merge_into(on_disk);
    disk.write_file(kFileName, on_disk.dump(2) + "\n");
    doc_ = std::move(on_disk);
  } catch (const Error& e) {
    if (log_)
      log_(LogLevel::warning, fmt::format("cannot write the autotune file {} ({}): the winners stay in this process",
                                          path().string(), e.what()));
  }
}

}  // namespace flashgen
