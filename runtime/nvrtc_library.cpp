#include "runtime/nvrtc_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <filesystem>
#include <mutex>

#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/nvrtc_version.h"

namespace flashgen {

namespace {

// NVRTC 12.4 is the oldest flashgen compiles with; 14 may change the options flashgen passes.
constexpr int kOldestMajor = 12, kOldestMinor = 4, kNewestMajor = 13;
// Newest first: NVRTC 13 is preferred where the driver can load its cubins.
constexpr const char* kNames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};

// Why `library` (just loaded) is not taken, or "" when it is; fills its entry points and version.
std::string take(void* library, NvrtcLibrary& nv, std::optional<int> driver_version) {
  const char* missing = nullptr;
  const auto resolve = [&](auto& slot, const char* symbol) {
    void* p = dlsym(library, symbol);
    if (p == nullptr && missing == nullptr) missing = symbol;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
#define FLASHGEN_RESOLVE(name) resolve(nv.name, #name)
  FLASHGEN_RESOLVE(nvrtcVersion);
  FLASHGEN_RESOLVE(nvrtcGetErrorString);
  FLASHGEN_RESOLVE(nvrtcCreateProgram);
  FLASHGEN_RESOLVE(nvrtcDestroyProgram);
  FLASHGEN_RESOLVE(nvrtcCompileProgram);
  FLASHGEN_RESOLVE(nvrtcGetProgramLogSize);
  FLASHGEN_RESOLVE(nvrtcGetProgramLog);
  FLASHGEN_RESOLVE(nvrtcGetCUBINSize);
  FLASHGEN_RESOLVE(nvrtcGetCUBIN);
  FLASHGEN_RESOLVE(nvrtcGetPTXSize);
  FLASHGEN_RESOLVE(nvrtcGetPTX);
#undef FLASHGEN_RESOLVE
  if (missing != nullptr) return fmt::format("not NVRTC: it lacks {}", missing);
  if (nv.nvrtcVersion(&nv.major, &nv.minor) != NVRTC_SUCCESS) return "nvrtcVersion failed";
  if (nv.major < kOldestMajor || (nv.major == kOldestMajor && nv.minor < kOldestMinor) || nv.major > kNewestMajor)
    return fmt::format("NVRTC {}, expected {}.{} to {}.x", nv.version(), kOldestMajor, kOldestMinor, kNewestMajor);
  if (driver_version && nv.major > *driver_version / 1000)
    return fmt::format("NVRTC {} makes cubins for CUDA {} drivers; the installed driver supports CUDA {}.{}",
                       nv.version(), nv.major, *driver_version / 1000, *driver_version % 1000 / 10);
  return {};
}

// Loading is attempted once; the outcome (library or error) is kept for every later call.
struct LibraryState {
  std::mutex mutex;
  bool searched = false;
  NvrtcLibrary library{};
  std::string error;
  std::vector<NvrtcCandidate> host;
  std::optional<NvrtcSearch> test_search;
};

LibraryState& state() {
  static LibraryState s;
  return s;
}

}  // namespace

std::string NvrtcLibrary::version() const { return NvrtcVersion{major, minor}.str(); }

NvrtcSearch NvrtcSearch::from_process() {
  NvrtcSearch s;
  s.flashgen_nvrtc = nvrtc_path_from_env();
  for (std::string& path : nvrtc_paths_from_env()) s.env_paths.push_back({std::move(path), "$FLASHGEN_NVRTC_PATHS"});
  s.cuda_home = cuda_toolkit_dir_from_env("CUDA_HOME");
  s.cuda_path = cuda_toolkit_dir_from_env("CUDA_PATH");
  if (cuda_available()) {
    int version = 0;
    if (cuda_driver().cuDriverGetVersion(&version) == CUDA_SUCCESS) s.driver_version = version;
  }
  return s;
}

std::vector<NvrtcCandidate> nvrtc_candidates(const NvrtcSearch& search) {
  if (search.flashgen_nvrtc) return {{*search.flashgen_nvrtc, "$FLASHGEN_NVRTC"}};
  std::vector<NvrtcCandidate> out = search.env_paths;
  out.insert(out.end(), search.host.begin(), search.host.end());
  const auto toolkit = [&](const std::filesystem::path& root, const std::string& origin) {
    for (const char* name : kNames) out.push_back({(root / "lib64" / name).string(), origin});
  };
  if (search.cuda_home) toolkit(*search.cuda_home, "$CUDA_HOME");
  if (search.cuda_path) toolkit(*search.cuda_path, "$CUDA_PATH");
  if (search.default_locations) {
    toolkit("/usr/local/cuda", "the default toolkit");
    for (const char* name : kNames) out.push_back({name, "the system library path"});
  }
  return out;
}

NvrtcLibrary load_nvrtc(const std::vector<NvrtcCandidate>& candidates, std::optional<int> driver_version) {
  std::string tried;
  for (const NvrtcCandidate& c : candidates) {
    const bool is_file = c.path.find('/') != std::string::npos;
    std::error_code ec;
    std::string why;
    if (is_file && !std::filesystem::exists(c.path, ec)) {
      why = "no such file";
    } else if (void* library = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); library == nullptr) {
      const char* error = dlerror();
      why = is_file ? fmt::format("cannot be loaded: {}", error != nullptr ? error : "unknown dlopen error")
                    : "not found by the dynamic linker";
    } else {
      NvrtcLibrary nv{};
      nv.path = c.path;
      why = take(library, nv, driver_version);
      if (why.empty()) return nv;
    }
    tried += fmt::format("\n  {} ({}): {}", c.path, c.origin, why);
  }
  throw Error(Status::no_device,
              fmt::format("no usable NVRTC found, so CUDA kernels cannot be compiled (CPU tensors still work); "
                          "looked at:{}\nInstall NVRTC 12.4+ or 13.x (e.g. pip install nvidia-cuda-nvrtc-cu12) or "
                          "set FLASHGEN_NVRTC to the path of libnvrtc.so",
                          tried.empty() ? " nothing" : tried));
}

const NvrtcLibrary& nvrtc_library() {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.searched) {
    NvrtcSearch search = s.test_search ? *s.test_search : NvrtcSearch::from_process();
    if (!s.test_search) search.host = s.host;
    try {
      s.library = load_nvrtc(nvrtc_candidates(search), search.driver_version);
    } catch (const Error& e) {
      s.error = e.what();
    }
    s.searched = true;
  }
  if (!s.error.empty()) throw Error(Status::no_device, s.error);
  return s.library;
}

void add_nvrtc_candidate(NvrtcCandidate candidate) {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.searched)
    throw Error(Status::invalid_argument,
                fmt::format("NVRTC candidate '{}': NVRTC was already looked for (loaded from {}); add candidates "
                            "before the first CUDA compile",
                            candidate.path, s.error.empty() ? s.library.path : "nowhere"));
  if (candidate.path.empty())
    throw Error(Status::invalid_argument, "NVRTC candidate: the path is empty, expected a libnvrtc file");
  s.host.push_back(std::move(candidate));
}

void reset_nvrtc_library_for_testing(std::optional<NvrtcSearch> search) {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  s.searched = false;
  s.library = {};
  s.error.clear();
  s.test_search = std::move(search);
}

}  // namespace flashgen
