// `flashgen cache warm`: compiles ahead of time, into a cache directory, the kernels the
// runtime selects for a set of problems (for container images: warm the directory when the
// image is built, point FLASHGEN_CACHE_DIR at it read-only when it runs; docs/cache.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string_view>
#include <utility>

#include "compiler/kernel_selection.h"
#include "runtime/autotune_db.h"
#include "runtime/autotune_selection.h"
#include "runtime/cache_directory.h"
#include "runtime/environment.h"
#include "runtime/kernel_cache.h"
#include "runtime/launch_plan.h"
#include "tools/flashgen/bench_grid.h"
#include "tools/flashgen/commands.h"
#include "tools/flashgen/problem_set.h"
#include "tools/flashgen/status_line.h"

namespace flashgen::cli {
namespace {

namespace fs = std::filesystem;

struct WarmOptions {
  ProblemSetOptions problems;  // --head-dims, --dtypes, --causal, --seqlens, --passes
  std::vector<std::string> archs = {"sm_80", "sm_90a"};
  std::string window = "off", softcap = "off", deterministic = "off", varlen = "off";
  std::vector<std::string> kv_caches = {"none"};
  std::string cache_dir;
  std::string package;  // --package: a kernel set for a package, DIR/nvrtc-<version>
  std::string device;  // whose autotune winners to compile too (autotune.json in the directory)
  int threads = 0;
};

// The archs the runtime runs kernels for (gpu_attention.cpp's device_arch): Hopper runs sm_90a.
constexpr Arch kRuntimeArchs[] = {Arch::sm_80, Arch::sm_86, Arch::sm_89, Arch::sm_90a};

std::vector<Arch> parse_archs(const std::vector<std::string>& names) {
  const auto expected = [] {
    std::vector<std::string> spelled;
    for (Arch a : kRuntimeArchs) spelled.push_back(to_string(a));
    return fmt::format("{} (the archs the runtime runs; H100/H200: sm_90a)", fmt::join(spelled, ", "));
  };
  if (names.empty())
    throw Error(Status::invalid_argument, fmt::format("--archs: is empty, expected some of {}", expected()));
  std::vector<Arch> out;
  for (const std::string& name : names) {
    const auto arch = parse_arch(name);
    if (!arch || std::find(std::begin(kRuntimeArchs), std::end(kRuntimeArchs), *arch) == std::end(kRuntimeArchs))
      throw Error(Status::invalid_argument, fmt::format("--archs: got '{}', expected one of {}", name, expected()));
    if (std::find(out.begin(), out.end(), *arch) == out.end()) out.push_back(*arch);
  }
  return out;
}

enum class KvCache { none, contiguous, paged };

std::vector<KvCache> parse_kv_caches(const std::vector<std::string>& names) {
  constexpr std::pair<std::string_view, KvCache> kNames[] = {
      {"none", KvCache::none}, {"contiguous", KvCache::contiguous}, {"paged", KvCache::paged}};
  if (names.empty()) throw Error(Status::invalid_argument, "--kv-cache: is empty, expected some of none, contiguous, paged");
  std::vector<KvCache> out;
  for (const std::string& name : names) {
    const auto* it = std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& n) { return n.first == name; });
    if (it == std::end(kNames))
      throw Error(Status::invalid_argument, fmt::format("--kv-cache: got '{}', expected none, contiguous or paged", name));
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  return out;
}

void add_distinct(std::vector<KernelSpec>& out, const std::vector<KernelSpec>& specs) {
  for (const KernelSpec& s : specs)
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

// The distinct kernels the runtime selects for every problem of the set on every arch: the
// heuristic table's and, where <dir>/autotune.json holds a winner for the problem, the
// winner's too (the runtime runs the winner unless FLASHGEN_AUTOTUNE=off).
std::vector<KernelSpec> kernels_to_warm(const WarmOptions& o, const std::vector<Arch>& archs, const fs::path& dir) {
  ProblemSetOptions set = o.problems;
  set.window = parse_on_off_both(o.window, "--window");
  set.softcap = parse_on_off_both(o.softcap, "--softcap");
  set.deterministic = parse_on_off_both(o.deterministic, "--deterministic");
  const std::vector<bool> varlens = parse_on_off_both(o.varlen, "--varlen");
  const std::vector<KvCache> kv_caches = parse_kv_caches(o.kv_caches);
  const std::vector<TuneShape> shapes = problem_shapes(set);
  std::error_code ec;
  const bool tuned = fs::is_regular_file(dir / TuningDb::kFileName, ec);
  if (!tuned && !o.device.empty())
    throw Error(Status::invalid_argument,
                fmt::format("--device: '{}' needs the autotune winners, {} in {} (written by `flashgen tune`)",
                            o.device, TuningDb::kFileName, dir.string()));
  std::vector<KernelSpec> out;
  for (Arch arch : archs) {
    TunedSelection::Options table;
    table.arch = arch;
    const TunedSelection heuristic(table);
    std::optional<TunedSelection> winners;
    if (tuned) {
      TunedSelection::Options t = table;
      t.dir = dir;
      t.device = o.device;
      t.dir_option = "--cache-dir";
      t.device_option = "--device";
      t.log = default_log_sink();
      winners.emplace(std::move(t));
    }
    for (const TuneShape& shape : shapes)
      for (bool varlen : varlens)
        for (KvCache cache : kv_caches) {
          ProblemKey problem = problem_key(shape);
          problem.varlen = varlen;  // packed sequences: the length is their longest
          // Over a KV cache the split-KV forward runs (key counts read on the device), no backward.
          problem.seqused_k = cache == KvCache::contiguous;
          problem.paged = cache == KvCache::paged;
          for (TunedPass pass : {TunedPass::forward, TunedPass::backward}) {
            if (!(pass == TunedPass::forward ? shape.forward : (shape.backward && has_backward(problem)))) continue;
            add_distinct(out, heuristic.select(problem, pass));
            if (winners) add_distinct(out, winners->select(problem, pass));
          }
        }
  }
  return out;
}

// A failure in brief: its first two non-empty lines (NVRTC's "failed:" and the first
// error), without the kernel's name in front, which the caller shows.
std::string failure_text(const std::exception_ptr& error, const std::string& uri) {
  std::string text;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    text = e.what();
  }
  if (text.starts_with(uri + ": ")) text.erase(0, uri.size() + 2);
  std::string brief;
  int lines = 0;
  for (size_t at = 0; at < text.size() && lines < 2;) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) brief += (lines++ ? " " : "") + text.substr(at, end - at);
    at = end + 1;
  }
  return brief;
}

// The directory must take new entries: refuse it now rather than compile into memory.
void check_writable(const fs::path& dir) {
  if (disk_cache_disabled_by_env())
    throw Error(Status::invalid_argument,
                "FLASHGEN_DISABLE_DISK_CACHE is set: cache warm would write nothing; unset it to warm a directory");
  const CacheDirectory disk(dir);
  auto why = disk.root_problem();
  if (!why) why = disk.prepare_for_writing();
  if (why)
    throw Error(Status::invalid_argument,
                fmt::format("--cache-dir: cannot warm {}: {}; expected a directory this user can write", dir.string(),
                            *why));
}

enum class Outcome { failed, cached, compiled };

// The directory to fill: --package's set for the NVRTC this process compiles with, else the cache's.
fs::path warm_dir(const WarmOptions& o) {
  if (!o.package.empty()) {
    if (!o.cache_dir.empty())
      throw Error(Status::invalid_argument, "--package: given with --cache-dir, expected one of them");
    return fs::path(o.package) / packaged_set_name(loaded_nvrtc_version());
  }
  return o.cache_dir.empty() ? cache_dir_from_env() : fs::path(o.cache_dir);
}

void run_warm(const WarmOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir = warm_dir(o);
  if (o.threads < 0)
    throw Error(Status::invalid_argument,
                fmt::format("--threads: got {}, expected a count >= 1 (0: one per core)", o.threads));
  const std::vector<Arch> archs = parse_archs(o.archs);
  const std::vector<KernelSpec> specs = kernels_to_warm(o, archs, dir);  // option errors before any write
  check_writable(dir);

  auto line = std::make_shared<StatusLine>();
  const LogSink base = default_log_sink();
  KernelCacheOptions options;
  options.dir = dir;
  // Every kernel lands in `dir`: none is taken from elsewhere (the process that uses the
  // directory may not have the others).
  options.read_dirs.emplace();
  options.packaged_kernels = fs::path();
  options.compile_threads = o.threads;
  options.log = [line, base, shown = log_level_from_env()](LogLevel level, const std::string& message) {
    if (level < shown) return;
    line->clear();  // the message on a line of its own; the next update redraws the counter
    base(level, message);
  };
  KernelCache cache(std::move(options));
  const CacheDirectory disk(cache.dir());

  std::vector<Outcome> outcomes(specs.size(), Outcome::failed);
  std::vector<std::string> failed;  // "<uri>: <reason>"
  double compile_ms = 0;
  size_t done = 0;
  const auto on_ready = [&](const KernelReady& r) {
    const std::string uri = specs[r.index].uri();
    std::string what;
    if (r.error) {
      failed.push_back(fmt::format("{}: {}", uri, failure_text(r.error, uri)));
      what = "FAILED " + failed.back();
    } else if (r.kernel->from_disk_cache) {
      outcomes[r.index] = Outcome::cached;
      what = "cached " + uri;
    } else {
      outcomes[r.index] = Outcome::compiled;
      compile_ms += r.kernel->compile_ms;
      what = fmt::format("compiled {} ({:.0f} ms)", uri, r.kernel->compile_ms);
    }
    line->show(fmt::format("[{}/{}] {}", ++done, specs.size(), what));
  };
  try {
    cache.get_many(specs, on_ready);
  } catch (const std::exception&) {
    // on_ready heard of each failure; the summary names them all.
  }
  line->clear();

  // A kernel compiled but not stored (a lock held too long, a write error) helps no later process.
  for (size_t i = 0; i < specs.size(); ++i) {
    if (outcomes[i] != Outcome::compiled) continue;
    CacheEntry entry;
    std::string problem;
    if (disk.read(cache.entry_name(specs[i]), cache.key(specs[i]), entry, problem) == EntryState::valid) continue;
    outcomes[i] = Outcome::failed;
    failed.push_back(
        fmt::format("{}: not stored in the cache ({})", specs[i].uri(), problem.empty() ? "no entry" : problem));
  }
  const auto count = [&](Outcome what) { return std::count(outcomes.begin(), outcomes.end(), what); };

  std::vector<std::string> arch_names;
  for (Arch a : archs) arch_names.push_back(to_string(a));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("kernels          {} (for {}; NVRTC {})\n", specs.size(), fmt::join(arch_names, ", "),
                           nvrtc_version());
  std::cout << fmt::format("already cached   {}\n", count(Outcome::cached));
  std::cout << fmt::format("compiled         {} ({:.1f} s of NVRTC time)\n", count(Outcome::compiled),
                           compile_ms / 1000);
  std::cout << fmt::format("failed           {}\n", failed.size());
  std::cout << fmt::format("wall time        {:.1f} s\n", wall_s);
  std::cout << fmt::format("cache directory  {}\n", cache.dir().string());
  std::cout.flush();
  if (!failed.empty())
    throw Error(Status::compile_error, fmt::format("cache warm: {} of {} kernels failed:\n  {}", failed.size(),
                                                   specs.size(), fmt::join(failed, "\n  ")));
}

}  // namespace

void add_cache_warm(CLI::App& cache) {
  auto o = std::make_shared<WarmOptions>();
  auto* cmd = cache.add_subcommand(
      "warm", "compile the kernels the runtime selects for a set of problems into the cache directory (for images)");
  cmd->footer("For container images: warm the directory when the image is built, set FLASHGEN_CACHE_DIR to it at "
              "run time; read-only is fine (docs/cache.md).");
  o->problems.add_to(*cmd);
  cmd->get_option("--seqlens")
      ->description("sequence lengths, e.g. 1k,4k,16k: they matter only on sm_90a at head dims that are no multiple "
                    "of 8 (below and from 4k) and for autotune winners (per bucket)");
  cmd->add_option("--archs", o->archs, "target archs (comma-separated): sm_80, sm_86, sm_89, sm_90a")
      ->delimiter(',')
      ->check(not_empty("some of sm_80, sm_86, sm_89, sm_90a"))
      ->capture_default_str();
  cmd->add_option("--window", o->window, "sliding-window kernels: on, off or both")->capture_default_str();
  cmd->add_option("--softcap", o->softcap, "soft-capping kernels: on, off or both")->capture_default_str();
  cmd->add_option("--deterministic", o->deterministic, "deterministic backward (separate dQ kernel): on, off or both")
      ->capture_default_str();
  cmd->add_option("--varlen", o->varlen,
                  "kernels of packed variable-length sequences (cu_seqlens; --seqlens stands for the longest "
                  "sequence): on, off or both")
      ->capture_default_str();
  cmd->add_option("--kv-cache", o->kv_caches,
                  "forward kernels over a KV cache (comma-separated): none, contiguous (key counts per sequence), "
                  "paged (a block table, any page size); with --varlen, packed queries over it")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--cache-dir", o->cache_dir,
                  "the directory to warm (default: FLASHGEN_CACHE_DIR, else the default cache directory); an "
                  "autotune.json in it adds its winners' kernels");
  cmd->add_option("--package", o->package,
                  "warm a package's kernel set instead of a cache directory: DIR/nvrtc-<major>.<minor> for the NVRTC "
                  "compiling (the runtime's RuntimeOptions::packaged_kernels or FLASHGEN_PACKAGED_KERNELS names DIR; "
                  "the wheel ships one as flashgen/kernels)");
  cmd->add_option("--device", o->device,
                  "with autotune.json: the device whose winners to compile, its GPU name or key (default: the sole "
                  "device with winners for each arch)");
  cmd->add_option("--threads", o->threads, "parallel NVRTC compiles (0: one per core)")->capture_default_str();
  cmd->callback([o] { run_warm(*o); });
}

}  // namespace flashgen::cli
