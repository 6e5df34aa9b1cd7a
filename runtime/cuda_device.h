// The device-level part of runtime/cuda_driver.h, usable without the CUDA headers
// (tools and benchmarks that do not link CUDA::toolkit).
#pragma once

// The driver's handle type, declared as cuda.h does.
typedef struct CUctx_st* CUcontext;

namespace flashgen {

// True when a driver and at least one device are present (never throws).
bool cuda_available();

// Makes the primary context of `device` current on this thread unless a context of
// `device` already is (a context of another device, or none, is replaced). The primary
// context is retained once per device for the life of the process.
// Throws Error(no_device) without a driver, Error(invalid_argument) for a bad ordinal.
CUcontext ensure_context(int device);

}  // namespace flashgen
