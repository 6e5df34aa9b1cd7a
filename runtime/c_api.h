// The pieces of the C boundary (c_api.cpp) that tests check directly: how exceptions become
// status codes and how the C runtime options become RuntimeOptions.
#pragma once

#include <functional>

#include "flashgen/flashgen.h"
#include "flashgen/flashgen.hpp"

namespace flashgen::c_api {

// Runs `body` and returns FLASHGEN_OK, or the status of what it threw (Error: its status;
// std::bad_alloc: out of memory; anything else: internal) with the message recorded as the
// calling thread's last error. Clears the last error first. Never throws.
flashgen_status guarded(const std::function<void()>& body) noexcept;

// Throws Error(invalid_argument) for an autotune policy outside 0..3 or negative cpu_threads.
RuntimeOptions runtime_options(const flashgen_runtime_options& options);

}  // namespace flashgen::c_api
