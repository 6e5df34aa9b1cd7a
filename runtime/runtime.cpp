// Runtime: validates, then dispatches to the CPU backend or the GPU backend.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <mutex>

#include "flashgen/flashgen.hpp"
#include "runtime/autotune.h"
#include "runtime/autotune_gpu.h"
#include "runtime/autotune_selection.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cuda_driver.h"
#include "runtime/environment.h"
#include "runtime/gpu_attention.h"
#include "runtime/kernel_cache.h"
#include "runtime/launch_plan.h"
#include "runtime/padded_substitute.h"
#include "runtime/validate.h"

namespace flashgen {

namespace {

void check_tune_shape(const TuneShape& s, size_t i) {
  auto fail = [&](const std::string& what) {
    throw Error(Status::invalid_argument, fmt::format("tune_shapes[{}].{}", i, what));
  };
  if (s.head_dim < kGpuMinHeadDim || s.head_dim > kGpuMaxHeadDim)
    fail(fmt::format("head_dim: is {}, expected {}..{}", s.head_dim, kGpuMinHeadDim, kGpuMaxHeadDim));
  if (s.dtype != DType::f16 && s.dtype != DType::bf16)
    fail(fmt::format("dtype: is {}, expected fp16 or bf16", to_string(s.dtype)));
  if (s.seqlen_q < 1 || s.seqlen_k < 1)
    fail(fmt::format("seqlen_q/seqlen_k: are {}/{}, expected >= 1", s.seqlen_q, s.seqlen_k));
  if (s.device < 0) fail(fmt::format("device: is {}, expected a CUDA device ordinal", s.device));
}

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  std::filesystem::path cache_dir;  // options.cache_dir, else the environment's: kernels and tuning winners
  AutotunePolicy policy = AutotunePolicy::cached;
  bool substitute = false;  // options.substitute_while_compiling, unless FLASHGEN_SUBSTITUTE_KERNELS says
  std::once_flag cache_once;
  std::unique_ptr<KernelCache> cache;
  std::unique_ptr<KernelSelector> selector;
  std::mutex profiles_mutex;
  std::map<int, DeviceProfile> profiles;

  // The kernel cache is created on the first GPU call: a CPU-only user never touches disk.
  KernelCache& kernels() {
    std::call_once(cache_once, [&] {
      KernelCacheOptions cache_options;
      cache_options.dir = cache_dir;
      if (!options.packaged_kernels.empty()) cache_options.packaged_kernels = options.packaged_kernels;
      cache_options.log = options.log;
      cache = std::make_unique<KernelCache>(std::move(cache_options));
    });
    return *cache;
  }

  const DeviceProfile& profile(int device) {
    std::lock_guard lock(profiles_mutex);
    auto it = profiles.find(device);
    if (it == profiles.end()) it = profiles.emplace(device, query_device_profile(device)).first;
    return it->second;
  }

  // The winners of this runtime's policy, else the heuristic table.
  Candidate kernels_for(const Problem& p, TunedPass pass) {
    return selector->select(problem_key(p), pass, profile(p.device), p.device);
  }

  SpecsFor specs_for(TunedPass pass) {
    return [this, pass](const Problem& p) { return kernels_for(p, pass); };
  }

  // Whether the substitute ran; says so (info), or what stopped it (debug).
  bool stood_in(const char* pass, const Problem& p, const SubstituteOutcome& outcome) const {
    const int d = substitute_head_dim(p).value_or(0);
    if (outcome.ran)
      options.log(LogLevel::info, fmt::format("{} of head dim {}: the d{} kernels stood in while its own compile",
                                              pass, p.head_dim, d));
    else if (!outcome.declined.empty())
      options.log(LogLevel::debug, fmt::format("{} of head dim {}: no d{} substitute while its own compile: {}", pass,
                                               p.head_dim, d, outcome.declined));
    return outcome.ran;
  }

  // Tunes `shapes` device by device; `declared` obeys the policy (startup/full only).
  std::vector<TuneOutcome> tune(const std::vector<TuneShape>& shapes, bool retune, bool declared) {
    for (size_t i = 0; i < shapes.size(); ++i) check_tune_shape(shapes[i], i);
    std::map<int, std::vector<const TuneShape*>> by_device;
    for (const TuneShape& s : shapes) by_device[s.device].push_back(&s);
    std::vector<TuneOutcome> out;
    for (const auto& [device, list] : by_device) {
      ensure_context(device);
      const DeviceProfile& dev = profile(device);
      std::vector<TuningKey> keys;
      for (const TuneShape* s : list)
        for (const TuningKey& k : tuning_keys(*s, dev.arch)) keys.push_back(k);
      GpuCandidateTimer timer(kernels(), device);
      TunerOptions o;
      o.cache = &kernels();
      o.timer = timer.timer();
      o.check = timer.checker();
      o.device = dev;
      o.log = options.log;
      const std::vector<TuneResult> results =
          declared ? selector->tune_declared(keys, o) : selector->tune(keys, retune, o);
      for (const TuneResult& r : results) out.push_back(to_outcome(r));
    }
    return out;
  }
};

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>()) {
  validate_environment();  // a bad FLASHGEN_* value fails creation, as it fails every CLI command
  if (!options.log)
    options.log = [](LogLevel level, const std::string& msg) {
      if (level >= LogLevel::warning) std::cerr << "flashgen: " << msg << "\n";
    };
  impl_->options = std::move(options);
  const RuntimeOptions& o = impl_->options;
  impl_->policy = effective_autotune_policy(o.autotune);
  impl_->substitute = env_flag("FLASHGEN_SUBSTITUTE_KERNELS").value_or(o.substitute_while_compiling);
  impl_->cache_dir = o.cache_dir.empty() ? cache_dir_from_env() : std::filesystem::path(o.cache_dir);
  impl_->selector = std::make_unique<KernelSelector>(impl_->policy, impl_->cache_dir, o.log);
  if ((impl_->policy == AutotunePolicy::startup || impl_->policy == AutotunePolicy::full) && !o.tune_shapes.empty()) {
    if (!cuda_available()) {
      o.log(LogLevel::warning, "autotune: no GPU here, the declared tune_shapes are not tuned");
    } else {
      impl_->tune(o.tune_shapes, false, true);
    }
  }
}

Runtime::~Runtime() = default;

const RuntimeOptions& Runtime::options() const { return impl_->options; }

void Runtime::forward(const ForwardArgs& args, void* stream) {
  const Problem p = validate_forward(args);
  if (p.device == kCpu && p.kv_cache()) return cpu::kv_cache_forward(args, p, impl_->options.cpu_threads);
  if (p.device == kCpu && p.varlen) return cpu::varlen_forward(args, p, impl_->options.cpu_threads);
  if (p.device == kCpu) return cpu::tiled_forward(args, p, impl_->options.cpu_threads);
  ensure_context(p.device);
  const Candidate specs = impl_->kernels_for(p, TunedPass::forward);
  const auto cu_stream = static_cast<CUstream>(stream);
  if (impl_->substitute &&
      impl_->stood_in("forward", p,
                      forward_on_substitute(impl_->kernels(), args, p, cu_stream, specs,
                                            impl_->specs_for(TunedPass::forward))))
    return;
  gpu_forward(impl_->kernels(), args, p, cu_stream, specs);
}

void Runtime::backward(const BackwardArgs& args, void* stream) {
  const Problem p = validate_backward(args);
  if (p.device == kCpu && p.varlen) return cpu::varlen_backward(args, p, impl_->options.cpu_threads);
  if (p.device == kCpu) return cpu::tiled_backward(args, p, impl_->options.cpu_threads);
  ensure_context(p.device);
  const Candidate specs = impl_->kernels_for(p, TunedPass::backward);
  const auto cu_stream = static_cast<CUstream>(stream);
  if (impl_->substitute &&
      impl_->stood_in("backward", p,
                      backward_on_substitute(impl_->kernels(), args, p, cu_stream, specs,
                                             impl_->specs_for(TunedPass::backward))))
    return;
  gpu_backward(impl_->kernels(), args, p, cu_stream, specs);
}

void Runtime::append_kv(const KvAppendArgs& args, void* stream) {
  const KvAppendProblem a = validate_kv_append(args);
  if (a.cache.device == kCpu) return cpu::kv_append(args, a, impl_->options.cpu_threads);
  ensure_context(a.cache.device);
  // The arch of the device's profile (queried once per device), not the driver per call.
  gpu_kv_append(impl_->kernels(), args, a, impl_->profile(a.cache.device).arch, static_cast<CUstream>(stream));
}

void Runtime::prepare(const ForwardArgs& args, Passes passes) {
  const unsigned bits = static_cast<unsigned>(passes);
  if (bits == 0 || (bits & ~static_cast<unsigned>(Passes::both)) != 0)
    throw Error(Status::invalid_argument,
                fmt::format("passes: is {}, expected forward (1), backward (2) or both (3)", bits));
  const Problem p = validate_forward(args);
  if (p.device == kCpu) return;
  ensure_context(p.device);
  // The forward's kernel first (the call that needs it comes first), then the backward's.
  Candidate specs;
  if (bits & static_cast<unsigned>(Passes::forward)) specs = impl_->kernels_for(p, TunedPass::forward);
  if ((bits & static_cast<unsigned>(Passes::backward)) && has_backward(problem_key(p))) {
    const Candidate bwd = impl_->kernels_for(p, TunedPass::backward);
    specs.insert(specs.end(), bwd.begin(), bwd.end());
  }
  impl_->kernels().prefetch(specs);
}

std::size_t Runtime::backward_workspace_bytes(const BackwardArgs& args) const {
  const Problem p = validate_backward(args);
  if (p.device == kCpu) return 0;
  return gpu_backward_workspace_bytes(p, device_arch(p.device));
}

std::vector<TuneOutcome> Runtime::tune(const std::vector<TuneShape>& shapes, bool retune) {
  return impl_->tune(shapes, retune, false);
}

}  // namespace flashgen
