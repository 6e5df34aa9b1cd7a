#include "runtime/autotune_db.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <limits>

#include "compiler/spec_fields.h"
#include "runtime/cache_directory.h"
#include "runtime/kernel_json.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen {

namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

nlohmann::json empty_doc() { return {{"format", kFormat}, {"devices", nlohmann::json::object()}}; }

// The file's document, or an empty one when it is missing; `problem` says why a present
// file was not usable.
nlohmann::json read_doc(const fs::path& path, std::string& problem) {
  // By the cache directory's rules: a link, a FIFO or a huge file is refused, never followed or read whole.
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  const auto text = CacheDirectory(path.parent_path()).read_file(path.filename().string(), kMaxBytes, problem);
  if (!text) return empty_doc();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
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

nlohmann::json device_json(const DeviceProfile& p) {
  const DeviceIdentity& d = p.identity;
  return {{"gpu", d.gpu_name},
          {"sm_count", d.sm_count},
          {"driver_version", d.driver_version},
          {"nvrtc_version", d.nvrtc_version},
          {"flashgen_version", d.flashgen_version},
          {"arch", to_string(p.arch)},
          {"max_shared_memory", p.limits.max_shared_memory},
          {"max_threads_per_block", p.limits.max_threads_per_block},
          {"entries", nlohmann::json::object()}};
}

// A device entry as a profile; nullopt when malformed. Files from before "arch" and the
// limits were recorded give the arch's own limits and no arch.
std::optional<DeviceProfile> device_from_json(const nlohmann::json& d, std::optional<Arch>& arch) {
  try {
    DeviceProfile p;
    p.identity.gpu_name = d.at("gpu").get<std::string>();
    p.identity.sm_count = d.at("sm_count").get<int>();
    p.identity.driver_version = d.at("driver_version").get<int>();
    p.identity.nvrtc_version = d.at("nvrtc_version").get<std::string>();
    p.identity.flashgen_version = d.at("flashgen_version").get<std::string>();
    p.limits.max_shared_memory = d.value("max_shared_memory", 0);
    p.limits.max_threads_per_block = d.value("max_threads_per_block", DeviceLimits{}.max_threads_per_block);
    arch = parse_arch(d.value("arch", ""));
    return p;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// Whether a device entry holds winners for kernels of `arch`.
bool has_winners_for(const nlohmann::json& d, std::optional<Arch> recorded, Arch arch) {
  const auto entries = d.find("entries");
  if (entries == d.end() || !entries->is_object() || entries->empty()) return false;
  if (recorded) return *recorded == arch;
  for (const auto& [name, e] : entries->items())
    if (e.is_object() && e.contains("kernels") && e["kernels"].is_array() && !e["kernels"].empty() &&
        e["kernels"][0].value("arch", "") == to_string(arch))
      return true;
  return false;
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
    // The winner differs from the key's default only in tiles, and names the kernels recorded.
    const Candidate defaults = heuristic_candidate(key);
    if (!kernels.is_array() || kernels.size() != defaults.size()) {
      problem = fmt::format("\"kernels\" should list {} kernels", defaults.size());
      return std::nullopt;
    }
    for (size_t i = 0; i < defaults.size(); ++i) {
      const nlohmann::json& k = kernels[i];
      std::optional<KernelSpec> read = spec_from_json(k, problem, defaults[i]);
      if (!read) {
        problem = fmt::format("kernel {}: {}", i, problem);
        return std::nullopt;
      }
      const KernelSpec& s = e.kernels.emplace_back(*read);
      const std::string uri = k.at("uri").get<std::string>();
      if (uri != s.uri()) {
        problem = fmt::format("kernel {} is '{}', expected '{}'", i, uri, s.uri());
        return std::nullopt;
      }
      if (!same_but_tiles(s, defaults[i])) {
        problem = fmt::format("kernel {} is '{}', expected a tiling of '{}'", i, uri, defaults[i].uri());
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

void TuningDb::store(const DeviceProfile& device, const std::vector<std::pair<TuningKey, TunedEntry>>& entries) {
  std::lock_guard lock(mutex_);
  auto merge_into = [&](nlohmann::json& doc) {
    nlohmann::json& d = doc["devices"][device.identity.key()];
    nlohmann::json kept = d.is_object() && d.contains("entries") && d["entries"].is_object()
                              ? std::move(d["entries"])
                              : nlohmann::json::object();
    d = device_json(device);
    d["entries"] = std::move(kept);
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

std::optional<DeviceProfile> TuningDb::tuned_device(Arch arch, std::string_view device,
                                                   std::string_view option) const {
  std::lock_guard lock(mutex_);
  const std::string nvrtc = nvrtc_version();
  std::vector<DeviceProfile> chosen;
  std::vector<std::string> same_versions;  // for the message
  for (const auto& [key, d] : doc_["devices"].items()) {
    std::optional<Arch> recorded;
    std::optional<DeviceProfile> p = device_from_json(d, recorded);
    if (!p || p->identity.key() != key) continue;
    p->arch = arch;
    if (key == device) {  // the full key names one device whatever its versions
      chosen = {*p};
      break;
    }
    if (p->identity.flashgen_version != version() || p->identity.nvrtc_version != nvrtc) continue;
    same_versions.push_back(key);
    if (device.empty() ? has_winners_for(d, recorded, arch) : p->identity.gpu_name == device) chosen.push_back(*p);
  }
  const std::string file = path().string();
  auto listed = [](const std::vector<std::string>& keys) {
    std::string out;
    for (const std::string& k : keys) out += (out.empty() ? "" : "; ") + k;
    return out.empty() ? std::string("none") : out;
  };
  if (chosen.size() == 1) return chosen.front();
  if (chosen.empty() && device.empty()) return std::nullopt;
  std::vector<std::string> keys;
  for (const DeviceProfile& p : chosen) keys.push_back(p.identity.key());
  if (chosen.empty())
    throw Error(Status::invalid_argument,
                fmt::format("{}: '{}' names no device of {} tuned by flashgen {} with NVRTC {} (devices: {}); give "
                            "a GPU name or a device key of the file",
                            option, device, file, version(), nvrtc, listed(same_versions)));
  if (device.empty())
    throw Error(Status::invalid_argument,
                fmt::format("{}: {} holds winners for {} from {} devices ({}); name one by its GPU name or key",
                            option, file, to_string(arch), chosen.size(), listed(keys)));
  throw Error(Status::invalid_argument, fmt::format("{}: '{}' names {} devices of {} ({}); give the device's full key",
                                                    option, device, chosen.size(), file, listed(keys)));
}

}  // namespace flashgen
