// NVRTC, loaded at run time with dlopen like the driver (runtime/cuda_driver.cpp): libflashgen
// starts, and serves CPU calls, where no CUDA is installed, and compiles with whichever NVRTC
// 12.4+ or 13.x the machine has. Looked for, in order:
//   $FLASHGEN_NVRTC (a file; when set, the only place looked)
//   files the host program adds (flashgen_add_nvrtc_candidate: the Python package names the
//     pip wheels next to its interpreter, nvidia-cuda-nvrtc (cu13) and nvidia-cuda-nvrtc-cu12)
//   $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64 (libnvrtc.so.13, then .so.12)
//   the dynamic linker's search path (libnvrtc.so.13, then libnvrtc.so.12)
#pragma once

#include <nvrtc.h>  // types only: nothing links libnvrtc

#include <optional>
#include <string>
#include <vector>

namespace flashgen {

// The entry points flashgen uses, and where they came from.
struct NvrtcLibrary {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  std::string path;  // the candidate it was loaded from (a file, or a name the linker resolved)
  int major = 0, minor = 0;

  std::string version() const;  // "12.9"
};

// One place to look: a file path, or a bare library name for the dynamic linker's search path.
struct NvrtcCandidate {
  std::string path;
  std::string origin;  // where the candidate comes from: "$FLASHGEN_NVRTC", "$CUDA_HOME", ...
};

// What the search depends on, read from the process by from_process(); tests build their own.
struct NvrtcSearch {
  std::optional<std::string> flashgen_nvrtc;  // $FLASHGEN_NVRTC
  std::vector<NvrtcCandidate> env_paths;      // $FLASHGEN_NVRTC_PATHS, in order
  std::vector<NvrtcCandidate> host;           // add_nvrtc_candidate, in call order
  std::optional<std::string> cuda_home, cuda_path;
  bool default_locations = true;  // /usr/local/cuda/lib64 and the system search path
  // The CUDA version the installed driver supports (cuDriverGetVersion, e.g. 12080); nullopt
  // where no driver loads. An NVRTC of a newer major version makes cubins that driver refuses.
  std::optional<int> driver_version;

  static NvrtcSearch from_process();
};

// Every place to look, in order.
std::vector<NvrtcCandidate> nvrtc_candidates(const NvrtcSearch& search);

// The first candidate that loads, has every entry point and an accepted version (12.4 to 13.x,
// major not above the driver's). Throws Error(no_device) "no usable NVRTC found" listing every
// candidate and why it was not taken. Libraries loaded stay loaded.
NvrtcLibrary load_nvrtc(const std::vector<NvrtcCandidate>& candidates, std::optional<int> driver_version);

// The process's NVRTC, loaded on first use (thread-safe); the outcome, library or error, is kept.
const NvrtcLibrary& nvrtc_library();

// Adds a candidate after $FLASHGEN_NVRTC and before $CUDA_HOME (the C API's
// flashgen_add_nvrtc_candidate). Throws Error(invalid_argument) once NVRTC has been looked for.
void add_nvrtc_candidate(NvrtcCandidate candidate);

// Tests only: forget the process's outcome; the next nvrtc_library() searches `search` (nullopt:
// the process's own). Not safe while another thread compiles.
void reset_nvrtc_library_for_testing(std::optional<NvrtcSearch> search);

}  // namespace flashgen
