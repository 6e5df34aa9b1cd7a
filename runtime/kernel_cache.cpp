#include "runtime/kernel_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "compiler/embedded_files.h"
#include "compiler/spec_fields.h"
#include "runtime/cache_directory.h"
#include "runtime/cache_files.h"
#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/exit_drain.h"
#include "runtime/kernel_dump.h"
#include "runtime/kernel_json.h"
#include "runtime/work_queue.h"

namespace flashgen {

namespace {

// Memory-cache key: the spec's fields hashed directly (no source generation), so a
// hit costs one hash and one map lookup.
struct SpecHash {
  size_t operator()(const KernelSpec& s) const {
    const auto fields = spec_field_values(s);
    return XXH3_64bits(fields.data(), sizeof fields);
  }
};

struct LoadedModule {
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

// One kernel of the memory cache. `mutex` is held while the kernel is being
// resolved (disk or NVRTC), so threads asking for the same spec wait for one result.
struct Slot {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  std::atomic<bool> queued{false};  // a background compile of it is pending (prefetch)
  CompiledKernel kernel;
  std::string key;
  std::string entry_name;
  std::mutex modules_mutex;
  std::vector<LoadedModule> modules;  // one per CUDA context it was loaded into
};

// One NVRTC release's part of a package's kernel set: its entries carry that release's keys.
struct PackagedSet {
  CacheDirectory dir;
  NvrtcVersion nvrtc;
};

// The sets under `root` this process can load, newest NVRTC first: a cubin needs a driver of
// its compiler's CUDA major or newer. Nothing when `root` does not exist (a package built
// without NVRTC ships no set).
std::vector<PackagedSet> packaged_sets(const std::filesystem::path& root, const LogSink& log) {
  std::string problem;
  const std::vector<PackagedSetDir> dirs = packaged_set_dirs(root, problem);
  if (!problem.empty()) log(LogLevel::warning, fmt::format("packaged kernels {} {}: not used", root.string(), problem));
  std::optional<int> driver_major;
  if (!dirs.empty() && cuda_available()) {
    int version = 0;
    if (cuda_driver().cuDriverGetVersion(&version) == CUDA_SUCCESS) driver_major = version / 1000;
  }
  std::vector<PackagedSet> sets;
  for (const PackagedSetDir& d : dirs) {
    if (driver_major && *driver_major < d.nvrtc.major) {
      log(LogLevel::info, fmt::format("packaged kernels {}: compiled for CUDA {}, the driver supports CUDA {}: "
                                      "not used",
                                      d.path.string(), d.nvrtc.major, *driver_major));
      continue;
    }
    sets.push_back({CacheDirectory(d.path, Trust::package), d.nvrtc});
  }
  return sets;
}

}  // namespace

std::string packaged_set_name(NvrtcVersion nvrtc) { return "nvrtc-" + nvrtc.str(); }

std::vector<PackagedSetDir> packaged_set_dirs(const std::filesystem::path& root, std::string& problem) {
  std::vector<PackagedSetDir> sets;
  const UniqueFd dir = open_directory(AT_FDCWD, root.string(), problem, Trust::package);
  if (!dir) return sets;
  for (const std::string& name : directory_names(dir.get())) {
    constexpr std::string_view kPrefix = "nvrtc-";
    const auto nvrtc = name.starts_with(kPrefix) ? NvrtcVersion::parse(std::string_view(name).substr(kPrefix.size()))
                                                 : std::nullopt;
    if (nvrtc && name == packaged_set_name(*nvrtc)) sets.push_back({*nvrtc, root / name});
  }
  std::sort(sets.begin(), sets.end(),
            [](const PackagedSetDir& a, const PackagedSetDir& b) { return a.nvrtc > b.nvrtc; });
  return sets;
}

struct KernelCache::Impl {
  KernelCacheOptions options;
  CacheDirectory disk{{}};
  std::vector<CacheDirectory> read_dirs;  // trusted ones only (KernelCacheOptions::read_dirs)
  std::vector<PackagedSet> packaged;      // KernelCacheOptions::packaged_kernels, loadable ones
  bool disk_enabled = true;
  CompileOptions compile;
  std::string environment;  // cache-invalidating variables, as read at construction
  std::optional<std::filesystem::path> dump_dir;
  std::chrono::milliseconds lock_timeout{0};  // FLASHGEN_CACHE_LOCK_TIMEOUT

  std::once_flag root_checked;
  std::atomic<bool> root_trusted{false};
  std::once_flag disk_checked;
  std::atomic<bool> disk_writable{false};
  std::atomic<bool> warned_memory_only{false};

  std::shared_mutex slots_mutex;
  std::unordered_map<KernelSpec, std::unique_ptr<Slot>, SpecHash> slots;

  std::atomic<long> memory_hits{0}, disk_hits{0}, packaged_hits{0}, compiles{0}, corrupt_entries{0};

  // prefetch's compile threads, started on its first use. Destroying them drops the queued
  // compiles; running ones finish.
  std::once_flag background_once;
  std::unique_ptr<WorkQueue> background;

  WorkQueue& background_pool() {
    std::call_once(background_once, [&] {
      background = std::make_unique<WorkQueue>(compile_threads());
    });
    return *background;
  }

  size_t compile_threads() const {
    return options.compile_threads > 0 ? static_cast<size_t>(options.compile_threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  }

  void log(LogLevel level, const std::string& message) const { options.log(level, message); }

  Slot& slot(const KernelSpec& spec) {
    {
      std::shared_lock lock(slots_mutex);
      auto it = slots.find(spec);
      if (it != slots.end()) return *it->second;
    }
    std::unique_lock lock(slots_mutex);
    auto& s = slots[spec];
    if (!s) s = std::make_unique<Slot>();
    return *s;
  }

  GeneratedSource source_for(const KernelSpec& spec) const {
    spec.validate();
    return options.generate(spec);
  }

  // The key of `spec` compiled by NVRTC `nvrtc` (the loaded one, or a packaged set's).
  std::string key_for(const KernelSpec& spec, const GeneratedSource& src, NvrtcVersion nvrtc) const {
    const std::string header = fmt::format(
        "flashgen {}\nnvrtc {}\narch {}\noptions {}\nenvironment\n{}templates {}\nkernel {}\nsource {} bytes\n",
        version(), nvrtc.str(), to_string(spec.arch), fmt::join(nvrtc_options(spec.arch, compile, nvrtc), " "),
        environment, embedded_files_digest(), src.kernel_name, src.source.size());
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    XXH3_128bits_update(&state, header.data(), header.size());
    XXH3_128bits_update(&state, src.source.data(), src.source.size());
    const XXH128_hash_t h = XXH3_128bits_digest(&state);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }

  static std::string entry_name(const KernelSpec& spec, const std::string& key) {
    return fmt::format("{}-{}", spec.uri(), key.substr(0, 16));
  }

  // New kernels stay in memory from now on; says so once per cache.
  void memory_only(const std::string& why) {
    disk_writable = false;
    if (!warned_memory_only.exchange(true))
      log(LogLevel::warning, fmt::format("kernel cache {} is not writable ({}): its entries are still used, "
                                         "kernels missing from it are compiled in memory for this process only",
                                         disk.root().string(), why));
  }

  // A directory that is a link, another user's or writable by others is not used at all:
  // checked once, at the first disk access, and said once.
  bool trusted() {
    std::call_once(root_checked, [&] {
      if (auto why = disk.root_problem()) {
        log(LogLevel::warning, fmt::format("refusing the kernel cache: {}; kernels are compiled in memory for this "
                                           "process only",
                                           *why));
      } else {
        root_trusted = true;
      }
    });
    return root_trusted;
  }

  bool writable() {
    std::call_once(disk_checked, [&] {
      if (auto why = disk.prepare_for_writing())
        memory_only(*why);
      else
        disk_writable = true;
    });
    return disk_writable;
  }

  // The verified disk entry as a CompiledKernel, or nullopt (missing; damaged or
  // untrusted: reported once). `state` says which.
  std::optional<CompiledKernel> read_entry(const CacheDirectory& dir, const KernelSpec& spec,
                                           const GeneratedSource& src, const Slot& s, bool& damage_reported,
                                           EntryState& state) {
    CacheEntry entry;
    std::string problem;
    state = dir.read(s.entry_name, s.key, entry, problem);
    if (state == EntryState::valid) {
      ++disk_hits;
      CompiledKernel k;
      k.spec = spec;
      k.kernel_name = std::move(entry.kernel_name);
      k.source = src.source;
      k.cubin = std::move(entry.cubin);
      k.log = std::move(entry.log);
      k.resources = entry.resources;
      k.compile_ms = entry.compile_ms;
      k.from_disk_cache = true;
      return k;
    }
    if (state != EntryState::missing && !damage_reported) {
      damage_reported = true;
      if (&dir != &disk) {  // a read-only directory's entry: never repaired, the next place is tried
        if (state == EntryState::corrupt) ++corrupt_entries;
        log(LogLevel::warning, fmt::format("read-only kernel cache {}: entry {} is not used ({})", dir.root().string(),
                                           s.entry_name, problem));
      } else if (state == EntryState::corrupt) {
        ++corrupt_entries;
        log(LogLevel::warning,
            fmt::format("kernel cache entry {} is damaged ({}): recompiling it", s.entry_name, problem));
      } else {
        log(LogLevel::warning, fmt::format("refusing kernel cache entry {} ({}): compiling it in memory, the entry "
                                           "is left alone",
                                           s.entry_name, problem));
      }
    }
    return std::nullopt;
  }

  // The kernel from the first read-only directory with a valid entry of it, or nullopt.
  std::optional<CompiledKernel> from_read_dirs(const KernelSpec& spec, const GeneratedSource& src, const Slot& s) {
    for (const CacheDirectory& dir : read_dirs) {
      bool reported = false;
      EntryState state;
      if (auto k = read_entry(dir, spec, src, s, reported, state)) return k;
    }
    return std::nullopt;
  }

  // The kernel from the package's newest set holding a valid entry of it, or nullopt. No
  // NVRTC is loaded: each set's key is that of the release that compiled it. On a hit the
  // slot keeps that set's key and entry name.
  std::optional<CompiledKernel> from_package(const KernelSpec& spec, const GeneratedSource& src, Slot& s) {
    for (const PackagedSet& set : packaged) {
      s.key = key_for(spec, src, set.nvrtc);
      s.entry_name = entry_name(spec, s.key);
      bool reported = false;
      EntryState state;
      if (auto k = read_entry(set.dir, spec, src, s, reported, state)) {
        ++packaged_hits;
        return k;
      }
    }
    return std::nullopt;
  }

  // This process's hold on the entry's lock; nullopt (and compile in memory) when another
  // process held it past lock_timeout or the lock cannot be used.
  std::optional<FileLock> lock_entry(const KernelSpec& spec, const Slot& s) {
    const std::string what = fmt::format("compiling {}", spec.uri());
    const double seconds = lock_timeout.count() / 1000.0;
    std::string holder = "another process";
    LockRequest request{.purpose = what, .timeout = lock_timeout, .on_wait = [&](const std::string& h) {
                          holder = h;
                          log(LogLevel::info, fmt::format("kernel cache: waiting up to {:.1f} s for {} (lock {})",
                                                          seconds, h, disk.lock_path(s.entry_name).string()));
                        }};
    try {
      auto lock = disk.lock(s.entry_name, request);
      if (!lock)
        log(LogLevel::warning,
            fmt::format("kernel cache: {} still holds {} after {:.1f} s (FLASHGEN_CACHE_LOCK_TIMEOUT): {} in memory "
                        "without the cache",
                        holder, disk.lock_path(s.entry_name).string(), seconds, what));
      return lock;
    } catch (const Error& e) {
      memory_only(e.what());
      return std::nullopt;
    }
  }

  CompiledKernel compile_now(const KernelSpec& spec, const GeneratedSource& src, const Slot& s) {
    CompileOptions opts = compile;
    opts.keep_ptx = dump_dir.has_value();
    CompiledKernel k = [&] {
      const CompileInFlight in_flight;  // exit() waits for it (runtime/exit_drain.h)
      return compile_kernel(spec, src, opts);
    }();
    register_exit_drain_after_compile();
    ++compiles;
    log(LogLevel::debug, fmt::format("compiled {} in {:.0f} ms: {} registers, {} bytes spilled", spec.uri(),
                                     k.compile_ms, k.resources.registers,
                                     k.resources.spill_stores + k.resources.spill_loads));
    if (dump_dir) {
      try {
        write_kernel_dump(*dump_dir, s.entry_name, k, nvrtc_options(spec.arch, compile));
      } catch (const Error& e) {
        log(LogLevel::warning, e.what());
      }
    }
    return k;
  }

  void store(const CompiledKernel& k, const Slot& s) {
    const nlohmann::json meta = {
        {"format", 1},
        {"uri", k.spec.uri()},
        {"key", s.key},
        {"kernel_name", k.kernel_name},
        {"spec", spec_to_json(k.spec)},
        {"resources", resources_to_json(k.resources)},
        {"nvrtc_version", nvrtc_version()},
        {"nvrtc_options", nvrtc_options(k.spec.arch, compile)},
        {"flashgen_version", version()},
        {"compile_ms", k.compile_ms},
        {"cubin_bytes", k.cubin.size()},
        {"cubin_xxh3", checksum_hex(k.cubin)},
        {"log", k.log},
    };
    try {
      disk.write(s.entry_name, k.source, k.cubin, meta);
    } catch (const Error& e) {
      memory_only(e.what());
    }
  }

  // What a lookup without compiling learnt of the cache directory's entry.
  struct Lookup {
    std::optional<CompiledKernel> kernel;
    bool damage_reported = false;
    EntryState state = EntryState::missing;
  };

  // Memory miss, no compile: the package's entry, else the cache directory's (when trusted),
  // else a read-only directory's. Leaves the slot's key and entry name those of the loaded
  // NVRTC, which a compile stores under.
  Lookup look_up(const KernelSpec& spec, const GeneratedSource& src, Slot& s) {
    Lookup l;
    if (disk_enabled) {
      if ((l.kernel = from_package(spec, src, s))) return l;
    }
    s.key = key_for(spec, src, loaded_nvrtc_version());
    s.entry_name = entry_name(spec, s.key);
    if (!disk_enabled) return l;
    if (trusted()) {
      if ((l.kernel = read_entry(disk, spec, src, s, l.damage_reported, l.state))) return l;
    }
    l.kernel = from_read_dirs(spec, src, s);  // before any lock: nothing is written for it
    return l;
  }

  // Memory miss: an entry (look_up), else compile under the key's cross-process lock.
  void resolve(const KernelSpec& spec, Slot& s) {
    const GeneratedSource src = source_for(spec);
    Lookup l = look_up(spec, src, s);
    if (l.kernel) {
      s.kernel = std::move(*l.kernel);
      return;
    }
    if (!disk_enabled || !trusted()) {
      s.kernel = compile_now(spec, src, s);
      return;
    }
    bool& damage_reported = l.damage_reported;
    EntryState& state = l.state;
    std::optional<FileLock> lock;
    if (state != EntryState::untrusted && writable()) lock = lock_entry(spec, s);
    if (lock) {
      // Whoever held the lock before us may have just written the entry.
      if (auto k = read_entry(disk, spec, src, s, damage_reported, state)) {
        s.kernel = std::move(*k);
        return;
      }
      if (state == EntryState::untrusted) lock.reset();  // appeared meanwhile: left alone
    }
    s.kernel = compile_now(spec, src, s);
    if (lock) store(s.kernel, s);
  }

  // The kernel if it is in memory or has an entry; nullptr (and nothing compiled) otherwise,
  // also while another thread resolves it.
  const CompiledKernel* find(const KernelSpec& spec) {
    Slot& s = slot(spec);
    if (s.ready.load(std::memory_order_acquire)) return &s.kernel;
    std::unique_lock lock(s.mutex, std::try_to_lock);
    if (!lock.owns_lock()) return nullptr;
    if (s.ready.load(std::memory_order_acquire)) return &s.kernel;
    Lookup l = look_up(spec, source_for(spec), s);
    if (!l.kernel) return nullptr;
    s.kernel = std::move(*l.kernel);
    s.ready.store(true, std::memory_order_release);
    return &s.kernel;
  }

  Slot& ready_slot(const KernelSpec& spec) {
    Slot& s = slot(spec);
    if (s.ready.load(std::memory_order_acquire)) {
      ++memory_hits;
      return s;
    }
    std::lock_guard lock(s.mutex);
    if (s.ready.load(std::memory_order_acquire)) {
      ++memory_hits;  // another thread resolved it while we waited
      return s;
    }
    resolve(spec, s);
    s.ready.store(true, std::memory_order_release);
    return s;
  }
};

static KernelCacheOptions options_for(std::filesystem::path dir) {
  KernelCacheOptions options;
  options.dir = std::move(dir);
  return options;
}

KernelCache::KernelCache(std::filesystem::path dir) : KernelCache(options_for(std::move(dir))) {}

KernelCache::KernelCache(KernelCacheOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  validate_environment();  // a bad FLASHGEN_* value fails here, as it fails every CLI command
  if (!options.log) options.log = default_log_sink();
  if (!options.generate) options.generate = generate_source;
  if (options.dir.empty()) options.dir = cache_dir_from_env();
  m.disk_enabled = options.use_disk && !disk_cache_disabled_by_env();
  m.disk = CacheDirectory(options.dir);
  if (m.disk_enabled) {
    for (const std::filesystem::path& dir : options.read_dirs ? *options.read_dirs : cache_read_dirs_from_env()) {
      CacheDirectory read_dir(dir);
      if (auto why = read_dir.root_problem())
        options.log(LogLevel::warning, fmt::format("refusing the read-only kernel {}: not searched", *why));
      else
        m.read_dirs.push_back(std::move(read_dir));
    }
  }
  if (m.disk_enabled) {
    const std::filesystem::path packaged = options.packaged_kernels.value_or(packaged_kernels_from_env());
    if (!packaged.empty()) m.packaged = packaged_sets(packaged, options.log);
  }
  m.compile = CompileOptions::from_environment();
  m.environment = cache_invalidating_environment();
  m.dump_dir = dump_dir_from_env();
  m.lock_timeout = cache_lock_timeout_from_env();
  m.options = std::move(options);
  warn_unknown_environment_once(m.options.log);
}

KernelCache::~KernelCache() {
  impl_->background.reset();  // the compile running on each thread finishes; queued ones are dropped
  // Modules exist only if the driver loaded. Each is unloaded in its own context;
  // failures (a context the caller already destroyed) are ignored at teardown.
  bool any = false;
  for (const auto& [spec, s] : impl_->slots) any = any || !s->modules.empty();
  if (!any) return;
  const CudaDriver& d = cuda_driver();
  CUcontext previous = nullptr;
  d.cuCtxGetCurrent(&previous);
  for (const auto& [spec, s] : impl_->slots) {
    for (const LoadedModule& m : s->modules) {
      d.cuCtxSetCurrent(m.context);
      d.cuModuleUnload(m.module);
    }
  }
  d.cuCtxSetCurrent(previous);
}

const CompiledKernel& KernelCache::get(const KernelSpec& spec) { return impl_->ready_slot(spec).kernel; }

std::vector<const CompiledKernel*> KernelCache::get_many(std::span<const KernelSpec> specs,
                                                         const KernelReadySink& on_ready) {
  std::vector<const CompiledKernel*> out(specs.size(), nullptr);
  std::vector<std::exception_ptr> errors(specs.size());
  std::mutex report_mutex;
  // Resolves spec i (on any thread) and reports it.
  const auto resolve = [&](size_t i) {
    KernelReady ready;
    ready.index = i;
    try {
      out[i] = ready.kernel = &get(specs[i]);
    } catch (...) {
      errors[i] = ready.error = std::current_exception();
    }
    if (on_ready) {
      std::lock_guard lock(report_mutex);
      on_ready(ready);
    }
  };
  std::vector<size_t> missing;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (impl_->slot(specs[i]).ready.load(std::memory_order_acquire))
      resolve(i);  // a memory hit
    else
      missing.push_back(i);
  }
  if (missing.size() <= 1) {
    for (size_t i : missing) resolve(i);
  } else {
    WorkQueue pool(std::min(impl_->compile_threads(), missing.size()));
    std::vector<std::future<void>> done;
    for (size_t i : missing) done.push_back(pool.submit([&resolve, i] { resolve(i); }));
    for (auto& d : done) d.get();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

bool KernelCache::ready(std::span<const KernelSpec> specs) {
  for (const KernelSpec& spec : specs) {
    try {
      if (impl_->find(spec) == nullptr) return false;
    } catch (const Error&) {  // e.g. no NVRTC to key the cache directory's entry: not ready;
      return false;           // the call that needs the kernel reports it
    }
  }
  return true;
}

void KernelCache::prefetch(std::span<const KernelSpec> specs) {
  Impl& m = *impl_;
  for (const KernelSpec& spec : specs) {
    Slot& s = m.slot(spec);
    if (s.ready.load(std::memory_order_acquire)) continue;
    // An entry (disk, package) is read here; only compiles go to the threads, with NVRTC
    // primed on this thread first (runtime/exit_drain.h): a served variant costs no priming.
    try {
      if (m.find(spec) != nullptr) continue;
    } catch (const Error&) {  // no NVRTC to key the entry: the background get() reports it
    }
    if (s.queued.exchange(true)) continue;
    prepare_compiles_for_exit();
    m.background_pool().submit([this, spec, &s] {
      try {
        const CompileInFlight job;  // exit() waits for all of it, the entry's write included
        get(spec);
      } catch (const std::exception& e) {
        // The get() that needs the kernel compiles it again and reports the error.
        impl_->log(LogLevel::debug, fmt::format("background compile of {} failed: {}", spec.uri(), e.what()));
      }
      s.queued = false;
    });
  }
}

LoadedKernel KernelCache::load(const KernelSpec& spec) {
  const CudaDriver& d = cuda_driver();
  CUcontext context = nullptr;
  // Every launch passes here: the spec's URI (a formatted string) is built only for an error
  // or a first load in a context.
  const auto uri_of_spec = [&] { return spec.uri(); };
  check_cuda(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent", uri_of_spec);
  if (context == nullptr)
    throw Error(Status::cuda_error,
                fmt::format("{}: no CUDA context is current on this thread; call ensure_context(device) first",
                            uri_of_spec()));

  Slot& s = impl_->ready_slot(spec);
  std::lock_guard lock(s.modules_mutex);
  for (const LoadedModule& m : s.modules)
    if (m.context == context) return {m.function, &s.kernel};

  const std::string uri = uri_of_spec();
  LoadedModule m{.context = context};
  check_cuda(d.cuModuleLoadData(&m.module, s.kernel.cubin.data()), "cuModuleLoadData", uri);
  const CUresult found = d.cuModuleGetFunction(&m.function, m.module, s.kernel.kernel_name.c_str());
  const CUresult sized =
      found == CUDA_SUCCESS
          ? d.cuFuncSetAttribute(m.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, spec.shared_memory_bytes())
          : found;
  if (sized != CUDA_SUCCESS) {
    d.cuModuleUnload(m.module);
    check_cuda(found, "cuModuleGetFunction", fmt::format("{} (entry {})", uri, s.kernel.kernel_name));
    check_cuda(sized, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
               fmt::format("{}, {} bytes", uri, spec.shared_memory_bytes()));
  }
  s.modules.push_back(m);
  return {m.function, &s.kernel};
}

std::string KernelCache::key(const KernelSpec& spec) const {
  return key(spec, loaded_nvrtc_version());
}

std::string KernelCache::key(const KernelSpec& spec, NvrtcVersion nvrtc) const {
  return impl_->key_for(spec, impl_->source_for(spec), nvrtc);
}

std::string KernelCache::entry_name(const KernelSpec& spec) const { return Impl::entry_name(spec, key(spec)); }

std::filesystem::path KernelCache::entry_dir(const KernelSpec& spec) const {
  return impl_->disk.entry_path(entry_name(spec));
}

std::filesystem::path KernelCache::lock_path(const KernelSpec& spec) const {
  return impl_->disk.lock_path(entry_name(spec));
}

const std::filesystem::path& KernelCache::dir() const { return impl_->disk.root(); }

const CompileOptions& KernelCache::compile_options() const { return impl_->compile; }

CacheStats KernelCache::stats() const {
  return CacheStats{.memory_hits = impl_->memory_hits,
                    .disk_hits = impl_->disk_hits,
                    .packaged_hits = impl_->packaged_hits,
                    .compiles = impl_->compiles,
                    .corrupt_entries = impl_->corrupt_entries,
                    .disk_writable = impl_->disk_enabled && impl_->disk_writable};
}

}  // namespace flashgen
