// Compiles in flight at process exit. exit() runs NVRTC's exit handlers (libnvrtc's static
// destructors, a dlclose of its builtins) even while a cache thread is inside a compile,
// which then aborts (docs/cache.md, "Exit during a compile"): a process that prepared or
// substituted a variant and exits before its compile ends would die. Exit handlers run in
// reverse order of registration, so before the process's first compile NVRTC is primed (one
// trivial compile registers NVRTC's handlers) and then a handler that waits for the compiles
// in flight is registered; compiles that would start after exit() began do not start.
#pragma once

namespace flashgen {

// Primes NVRTC and registers the exit drain, once per process (a trivial compile: ~50-100 ms
// the first time). Called on the thread that queues background compiles before it queues
// them, so that no exit can fall between a worker's first NVRTC call and the registration.
void prepare_compiles_for_exit();

// Held for one NVRTC compile, or for a background job that may compile and store a kernel.
class CompileInFlight {
 public:
  // Primes NVRTC and registers the exit drain on the process's first compile; throws
  // Error(internal) once the process is exiting (the compile must not start), unless this
  // thread holds one already (a compile inside a background job goes on).
  CompileInFlight();
  ~CompileInFlight();
  CompileInFlight(const CompileInFlight&) = delete;
  CompileInFlight& operator=(const CompileInFlight&) = delete;
};

}  // namespace flashgen
