#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "flashgen/flashgen.hpp"

// cuda.h maps API names to their current ABI versions with macros (cuMemAlloc ->
// cuMemAlloc_v2). Stringifying through one more macro level yields that versioned
// name, so dlsym gets exactly the symbol a program linked against libcuda would use.
#define FLASHGEN_SYMBOL_NAME(name) FLASHGEN_SYMBOL_NAME_EXPANDED(name)
#define FLASHGEN_SYMBOL_NAME_EXPANDED(name) #name

namespace flashgen {

namespace {

constexpr const char* kLibrary = "libcuda.so.1";
constexpr const char* kCpuStillWorks = "GPU operations are unavailable on this machine; CPU tensors still work";

template <typename F>
void resolve(void* library, F& slot, const char* symbol) {
  void* p = dlsym(library, symbol);
  if (p == nullptr)
    throw Error(Status::no_device, fmt::format("the CUDA driver ({}) lacks {}: the driver is older than flashgen "
                                               "needs (CUDA 13); {}",
                                               kLibrary, symbol, kCpuStillWorks));
  slot = reinterpret_cast<F>(p);
}

std::string error_text(const CudaDriver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_UNKNOWN";
  if (d.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) text = "unrecognized error code";
  return fmt::format("{} ({}: {})", name, static_cast<int>(r), text);
}

CudaDriver load_driver() {
  // RTLD_NODELETE: the driver stays mapped for the life of the process (contexts outlive us).
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr)
    throw Error(Status::no_device, fmt::format("no CUDA driver found ({}): {}", kLibrary, kCpuStillWorks));

  CudaDriver d{};
#define FLASHGEN_RESOLVE(name) resolve(library, d.name, FLASHGEN_SYMBOL_NAME(name))
  FLASHGEN_RESOLVE(cuInit);
  FLASHGEN_RESOLVE(cuGetErrorString);
  FLASHGEN_RESOLVE(cuGetErrorName);
  FLASHGEN_RESOLVE(cuDriverGetVersion);
  FLASHGEN_RESOLVE(cuDeviceGet);
  FLASHGEN_RESOLVE(cuDeviceGetCount);
  FLASHGEN_RESOLVE(cuDeviceGetName);
  FLASHGEN_RESOLVE(cuDeviceGetAttribute);
  FLASHGEN_RESOLVE(cuDevicePrimaryCtxRetain);
  FLASHGEN_RESOLVE(cuCtxGetCurrent);
  FLASHGEN_RESOLVE(cuCtxSetCurrent);
  FLASHGEN_RESOLVE(cuCtxGetDevice);
  FLASHGEN_RESOLVE(cuModuleLoadData);
  FLASHGEN_RESOLVE(cuModuleUnload);
  FLASHGEN_RESOLVE(cuModuleGetFunction);
  FLASHGEN_RESOLVE(cuFuncSetAttribute);
  FLASHGEN_RESOLVE(cuLaunchKernelEx);
  FLASHGEN_RESOLVE(cuMemAlloc);
  FLASHGEN_RESOLVE(cuMemFree);
  FLASHGEN_RESOLVE(cuMemAllocAsync);
  FLASHGEN_RESOLVE(cuMemFreeAsync);
  FLASHGEN_RESOLVE(cuMemsetD32Async);
  FLASHGEN_RESOLVE(cuMemcpyHtoD);
  FLASHGEN_RESOLVE(cuMemcpyDtoH);
  FLASHGEN_RESOLVE(cuMemcpy2D);
  FLASHGEN_RESOLVE(cuMemcpy3DAsync);
  FLASHGEN_RESOLVE(cuMemGetInfo);
  FLASHGEN_RESOLVE(cuDeviceGetMemPool);
  FLASHGEN_RESOLVE(cuMemPoolGetAttribute);
  FLASHGEN_RESOLVE(cuMemPoolSetAttribute);
  FLASHGEN_RESOLVE(cuPointerGetAttribute);
  FLASHGEN_RESOLVE(cuStreamSynchronize);
  FLASHGEN_RESOLVE(cuCtxSynchronize);
  FLASHGEN_RESOLVE(cuEventCreate);
  FLASHGEN_RESOLVE(cuEventDestroy);
  FLASHGEN_RESOLVE(cuEventRecord);
  FLASHGEN_RESOLVE(cuEventSynchronize);
  FLASHGEN_RESOLVE(cuEventElapsedTime);
  FLASHGEN_RESOLVE(cuStreamCreate);
  FLASHGEN_RESOLVE(cuStreamDestroy);
  FLASHGEN_RESOLVE(cuStreamBeginCapture);
  FLASHGEN_RESOLVE(cuStreamIsCapturing);
  FLASHGEN_RESOLVE(cuStreamEndCapture);
  FLASHGEN_RESOLVE(cuGraphInstantiateWithFlags);
  FLASHGEN_RESOLVE(cuGraphLaunch);
  FLASHGEN_RESOLVE(cuGraphExecDestroy);
  FLASHGEN_RESOLVE(cuGraphDestroy);
  FLASHGEN_RESOLVE(cuTensorMapEncodeTiled);
#undef FLASHGEN_RESOLVE

  const CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS)
    throw Error(Status::no_device, fmt::format("the CUDA driver ({}) failed to initialise: cuInit returned {}; {}",
                                               kLibrary, error_text(d, init), kCpuStillWorks));
  int count = 0;
  const CUresult counted = d.cuDeviceGetCount(&count);
  if (counted != CUDA_SUCCESS || count == 0)
    throw Error(Status::no_device,
                fmt::format("the CUDA driver ({}) reports no CUDA device{}; {}", kLibrary,
                            counted == CUDA_SUCCESS ? "" : fmt::format(" ({})", error_text(d, counted)),
                            kCpuStillWorks));
  return d;
}

// Loading is attempted once; its outcome (driver or error) is kept for every later call.
struct DriverState {
  std::once_flag once;
  CudaDriver driver{};
  Status error_status = Status::ok;
  std::string error_message;
};

DriverState& state() {
  static DriverState s;
  return s;
}

}  // namespace

std::string cuda_error_text(CUresult r) { return error_text(cuda_driver(), r); }

const CudaDriver& cuda_driver() {
  DriverState& s = state();
  std::call_once(s.once, [&] {
    try {
      s.driver = load_driver();
    } catch (const Error& e) {
      s.error_status = e.status();
      s.error_message = e.what();
    }
  });
  if (s.error_status != Status::ok) throw Error(s.error_status, s.error_message);
  return s.driver;
}

bool cuda_available() {
  try {
    cuda_driver();
    return true;
  } catch (const Error&) {
    return false;
  }
}

void check_cuda(CUresult r, const char* what, const std::string& context) {
  if (r == CUDA_SUCCESS) return;
  const std::string where = context.empty() ? "" : fmt::format(" [{}]", context);
  const std::string text = error_text(cuda_driver(), r);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    throw Error(Status::out_of_memory, fmt::format("{} failed: out of GPU memory, {}{}", what, text, where));
  throw Error(Status::cuda_error, fmt::format("{} failed: {}{}", what, text, where));
}

CUcontext ensure_context(int device) {
  const CudaDriver& d = cuda_driver();
  CUcontext current = nullptr;
  check_cuda(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != nullptr) {
    CUdevice current_device = -1;
    if (d.cuCtxGetDevice(&current_device) == CUDA_SUCCESS && current_device == device) return current;
  }

  int count = 0;
  check_cuda(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (device < 0 || device >= count)
    throw Error(Status::invalid_argument,
                fmt::format("device: got {}, expected a CUDA device ordinal in 0..{}", device, count - 1));

  // Each device's primary context is retained once and kept for the life of the
  // process: kernels loaded into it stay valid and the next switch is cheap.
  static std::mutex mutex;
  static std::vector<CUcontext> retained;
  CUcontext ctx = nullptr;
  {
    std::lock_guard lock(mutex);
    if (retained.size() < static_cast<size_t>(count)) retained.resize(count, nullptr);
    if (retained[device] == nullptr) {
      CUdevice dev = 0;
      check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", fmt::format("device {}", device));
      check_cuda(d.cuDevicePrimaryCtxRetain(&retained[device], dev), "cuDevicePrimaryCtxRetain",
                 fmt::format("device {}", device));
    }
    ctx = retained[device];
  }
  check_cuda(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", fmt::format("device {}", device));
  return ctx;
}

}  // namespace flashgen
