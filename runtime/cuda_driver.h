// The CUDA driver API, loaded lazily with dlopen so that flashgen starts on a
// machine without a driver and says so only when a GPU operation is asked for.
#pragma once

#include <cuda.h>

#include <string>
#include <type_traits>

#include "runtime/cuda_device.h"  // cuda_available, ensure_context

namespace flashgen {

// Function pointers to the driver entry points flashgen uses.
struct CudaDriver {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpy2D)(const CUDA_MEMCPY2D*);
  CUresult (*cuMemcpy3DAsync)(const CUDA_MEMCPY3D*, CUstream);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuDeviceGetMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*cuMemPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*cuPointerGetAttribute)(void*, CUpointer_attribute, CUdeviceptr);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  // Streams and CUDA graphs: what the graph-capture tests drive (the launch path itself
  // only enqueues on the caller's stream, which may be capturing).
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
};

// The loaded driver, initialised once (thread-safe). Throws Error(no_device) with a
// clear message when libcuda cannot be loaded, cuInit fails, or no device exists.
const CudaDriver& cuda_driver();

// r's name, number and text ("CUDA_ERROR_INVALID_VALUE (1: invalid argument)").
std::string cuda_error_text(CUresult r);

// Throws Error(cuda_error) naming `what` (and `context`, e.g. a kernel URI) unless r == CUDA_SUCCESS.
// CUDA_ERROR_OUT_OF_MEMORY becomes Status::out_of_memory.
void check_cuda(CUresult r, const char* what, const std::string& context = {});
// The same with the context built by `context()` only on a failure: for calls on every launch,
// whose context (a kernel's URI) is a formatted string.
template <class Context>
  requires std::is_invocable_r_v<std::string, Context>
void check_cuda(CUresult r, const char* what, Context&& context) {
  if (r != CUDA_SUCCESS) check_cuda(r, what, std::string(context()));
}

}  // namespace flashgen
