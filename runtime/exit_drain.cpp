// Compiles in flight at process exit: runtime/exit_drain.h.
#include "runtime/exit_drain.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "compiler/kernel_spec.h"
#include "flashgen/types.hpp"
#include "runtime/nvrtc_compiler.h"

namespace flashgen {
namespace {

// Never destroyed: cache threads may still hold it while exit() runs the static destructors.
struct Compiles {
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;
  bool exiting = false;
  std::once_flag primed;
};

Compiles& compiles() {
  static auto* c = new Compiles;
  return *c;
}

// Bounded: a compile that never ends must not keep the process alive for ever.
constexpr auto kDrainLimit = std::chrono::seconds(120);

void drain_at_exit() {
  Compiles& c = compiles();
  std::unique_lock lock(c.mutex);
  c.exiting = true;
  c.idle.wait_for(lock, kDrainLimit, [&] { return c.in_flight == 0; });
}

void register_drain() { std::atexit(drain_at_exit); }

void prime_then_register() {
  try {
    compile_source("flashgen_exit_drain_prime", "extern \"C\" __global__ void flashgen_prime() {}", Arch::sm_80);
  } catch (const Error&) {
    // No NVRTC, or it fails: the compile that follows reports it; nothing to wait for.
  }
  register_drain();
}

// Guards held by this thread: a compile inside a background job the drain already waits for
// goes on after exit() began.
thread_local int held_here = 0;

}  // namespace

void prepare_compiles_for_exit() { std::call_once(compiles().primed, prime_then_register); }

void register_exit_drain_after_compile() { std::call_once(compiles().primed, register_drain); }

CompileInFlight::CompileInFlight() {
  Compiles& c = compiles();
  std::lock_guard lock(c.mutex);
  if (c.exiting && held_here == 0) throw Error(Status::internal, "the process is exiting: no compile starts now");
  ++c.in_flight;
  ++held_here;
}

CompileInFlight::~CompileInFlight() {
  Compiles& c = compiles();
  std::lock_guard lock(c.mutex);
  --held_here;
  if (--c.in_flight == 0) c.idle.notify_all();
}

}  // namespace flashgen
