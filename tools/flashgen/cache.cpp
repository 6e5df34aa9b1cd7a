// `flashgen cache stats|ls|clear|env`: the on-disk kernel cache and the environment
// variables flashgen reads (`cache warm`: cache_warm.cpp).
#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <string_view>

#include "runtime/cache_directory.h"
#include "runtime/environment.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_json.h"
#include "tools/flashgen/commands.h"

namespace flashgen::cli {
namespace {

std::filesystem::path cache_root(const std::string& dir) {
  return dir.empty() ? cache_dir_from_env() : std::filesystem::path(dir);
}

std::string size_text(std::uintmax_t bytes) {
  if (bytes >= 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

const char* state_text(EntryState state) {
  switch (state) {
    case EntryState::valid: return "ok";
    case EntryState::corrupt: return "damaged";
    case EntryState::untrusted: return "refused";
    case EntryState::missing: break;
  }
  return "missing";
}

// The package's kernel sets (FLASHGEN_PACKAGED_KERNELS: the pip-installed command sets it),
// searched before the cache directory: entries per NVRTC release.
void packaged_stats() {
  const std::filesystem::path root = packaged_kernels_from_env();
  if (root.empty()) return;
  std::string problem;
  const std::vector<PackagedSetDir> sets = packaged_set_dirs(root, problem);
  const std::string note = !problem.empty() ? fmt::format(" ({}: not used)", problem) : sets.empty() ? " (no set)" : "";
  std::cout << fmt::format("packaged kernels {}{}\n", root.string(), note);
  for (const PackagedSetDir& set : sets) {
    size_t valid = 0, damaged = 0;
    for (const EntryInfo& e : CacheDirectory(set.path, Trust::package).list())
      (e.state == EntryState::valid ? valid : damaged) += 1;
    std::cout << fmt::format("  NVRTC {:<8} {} entries ({} damaged: compiled instead)\n", set.nvrtc.str(),
                             valid + damaged, damaged);
  }
}

void stats(const std::string& dir) {
  const CacheDirectory cache(cache_root(dir));
  const auto entries = cache.list();
  std::uintmax_t bytes = 0;
  size_t damaged = 0, refused = 0;
  double compile_ms = 0;
  for (const EntryInfo& e : entries) {
    bytes += e.bytes;
    if (e.state == EntryState::corrupt) ++damaged;
    if (e.state == EntryState::untrusted) ++refused;
    if (e.state == EntryState::valid) compile_ms += e.meta["compile_ms"].get<double>();  // typed by list()
  }
  std::cout << fmt::format("cache directory  {}\n", cache.root().string());
  std::cout << fmt::format("entries          {} ({} damaged: recompiled on next use; {} refused: links or not "
                           "this user's, left alone)\n",
                           entries.size(), damaged, refused);
  std::cout << fmt::format("size             {}\n", size_text(bytes));
  std::cout << fmt::format("compile time     {:.1f} s (NVRTC time the cached kernels took)\n", compile_ms / 1000.0);
  if (disk_cache_disabled_by_env())
    std::cout << "disk cache       disabled by FLASHGEN_DISABLE_DISK_CACHE\n";
  packaged_stats();
}

void ls(const std::string& dir) {
  const CacheDirectory cache(cache_root(dir));
  const auto entries = cache.list();
  if (entries.empty()) {
    std::cout << fmt::format("no kernels cached in {}\n", cache.root().string());
    return;
  }
  std::cout << fmt::format("{:<60} {:>10} {:>5} {:>7} {:>9}  {}\n", "entry", "size", "regs", "spills", "compile",
                           "state");
  for (const EntryInfo& e : entries) {
    if (e.state != EntryState::valid) {  // one entry's damage never stops the listing
      std::cout << fmt::format("{:<60} {:>10} {:>5} {:>7} {:>9}  {}: {}\n", e.name, size_text(e.bytes), "-", "-", "-",
                               state_text(e.state), e.problem);
      continue;
    }
    const KernelResources r = resources_from_json(e.meta["resources"]);  // typed by list()
    const std::int64_t spills = std::int64_t{r.spill_stores} + r.spill_loads;
    std::cout << fmt::format("{:<60} {:>10} {:>5} {:>7} {:>7.0f}ms  ok\n", e.name, size_text(e.bytes), r.registers,
                             spills, e.meta["compile_ms"].get<double>());
  }
}

void clear(const std::string& dir) {
  const CacheDirectory cache(cache_root(dir));
  const ClearReport report = cache.clear();
  const size_t others = report.removed.size() - report.entries;
  std::cout << fmt::format("removed {} kernel{} and {} temporary or lock file{} from {}\n", report.entries,
                           report.entries == 1 ? "" : "s", others, others == 1 ? "" : "s", cache.root().string());
  for (const auto& [path, why] : report.skipped) std::cout << fmt::format("skipped {}: {}\n", path, why);
}

void env() {
  const std::vector<std::string> problems = environment_problems();
  for (const EnvVar& v : environment_variables()) {
    const auto value = env_value(v.name);
    std::cout << fmt::format("{}\n    {}\n    value: {}    default: {}    {}\n", v.name, v.description,
                             value ? *value : "(unset)", v.default_value,
                             v.effect == EnvEffect::invalidates_cache ? "changes the cache key" : "cache-neutral");
    for (const std::string& p : problems)
      if (std::string_view(p).starts_with(std::string(v.name) + ":"))
        std::cout << fmt::format("    invalid: {} (flashgen refuses to start with it)\n", p);
  }
  for (const std::string& name : unknown_flashgen_variables())
    std::cout << fmt::format("{}\n    unknown to flashgen: ignored (a typo?)\n", name);
  std::cout << fmt::format("cache directory in use: {}\n", cache_dir_from_env().string());
}

}  // namespace

void register_cache(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("cache", "inspect, clear or warm the on-disk kernel cache; list flashgen's environment");
  cmd->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto add_dir = [dir](CLI::App* sub) {
    sub->add_option("--dir", *dir, "cache directory (default: FLASHGEN_CACHE_DIR, else $XDG_CACHE_HOME/flashgen, "
                                   "else ~/.cache/flashgen, else $TMPDIR/flashgen-cache-<uid>)");
  };
  auto* s = cmd->add_subcommand("stats", "number of kernels, size, damaged entries");
  add_dir(s);
  s->callback([dir] { stats(*dir); });
  auto* l = cmd->add_subcommand("ls", "one line per cached kernel: size, registers, spills, compile time");
  add_dir(l);
  l->callback([dir] { ls(*dir); });
  auto* c = cmd->add_subcommand("clear", "remove the cached kernels, temporaries and free locks flashgen wrote; "
                                         "report what else it left");
  add_dir(c);
  c->callback([dir] { clear(*dir); });
  add_cache_warm(*cmd);
  auto* e = cmd->add_subcommand("env", "the FLASHGEN_* environment variables: meaning, value, effect on the cache");
  e->callback([] { env(); });
}

}  // namespace flashgen::cli
