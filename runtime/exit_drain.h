// Compiles in flight at process exit. exit() runs NVRTC's exit handlers (libnvrtc's static
// destructors, a dlclose of its builtins) even while a cache thread is inside a compile,
// which then aborts (docs/cache.md, "Exit during a compile"): a process that prepared or
// substituted a variant and exits before its compile ends would die. Exit handlers run in
// reverse order of registration, so the drain (a handler that waits for the compiles in
// flight) is registered only once NVRTC's handlers exist: after the first foreground compile,
// or, before the first background one, after a trivial priming compile. Compiles that would
// start after exit() began do not start.
#pragma once

namespace flashgen {

// Primes NVRTC and registers the exit drain, once per process (a trivial compile: ~40 ms on
// 2 cores). Called on the thread that queues background compiles before it queues them, so
// that no exit can fall between a worker's first NVRTC call and the registration.
void prepare_compiles_for_exit();

// Registers the exit drain, if not done yet, after a compile on this thread returned (NVRTC's
// handlers exist by then): a process that only compiles in the foreground pays no priming.
void register_exit_drain_after_compile();

// Held for one NVRTC compile, or for a background job that may compile and store a kernel.
class CompileInFlight {
 public:
  // Throws Error(internal) once the process is exiting (the compile must not start), unless
  // this thread holds one already (a compile inside a background job goes on).
  CompileInFlight();
  ~CompileInFlight();
  CompileInFlight(const CompileInFlight&) = delete;
  CompileInFlight& operator=(const CompileInFlight&) = delete;
};

}  // namespace flashgen
