// Runtime: validates, then dispatches to the CPU backend or the GPU backend.
#include <iostream>
#include <mutex>

#include "flashgen/flashgen.hpp"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_attention.h"
#include "runtime/kernel_cache.h"
#include "runtime/validate.h"

namespace flashgen {

struct Runtime::Impl {
  RuntimeOptions options;
  std::once_flag cache_once;
  std::unique_ptr<KernelCache> cache;

  // The kernel cache is created on the first GPU call: a CPU-only user never touches disk.
  KernelCache& kernels() {
    std::call_once(cache_once, [&] {
      KernelCacheOptions cache_options;
      cache_options.dir = options.cache_dir;
      cache_options.log = options.log;
      cache = std::make_unique<KernelCache>(std::move(cache_options));
    });
    return *cache;
  }
};

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>()) {
  if (!options.log)
    options.log = [](LogLevel level, const std::string& msg) {
      if (level >= LogLevel::warning) std::cerr << "flashgen: " << msg << "\n";
    };
  impl_->options = std::move(options);
}

Runtime::~Runtime() = default;

const RuntimeOptions& Runtime::options() const { return impl_->options; }

void Runtime::forward(const ForwardArgs& args, void* stream) {
  const Problem p = validate_forward(args);
  if (p.device == kCpu) return cpu::tiled_forward(args, p, impl_->options.cpu_threads);
  ensure_context(p.device);
  gpu_forward(impl_->kernels(), args, p, static_cast<CUstream>(stream));
}

void Runtime::backward(const BackwardArgs& args, void* stream) {
  const Problem p = validate_backward(args);
  if (p.device == kCpu) return cpu::tiled_backward(args, p, impl_->options.cpu_threads);
  ensure_context(p.device);
  gpu_backward(impl_->kernels(), args, p, static_cast<CUstream>(stream));
}

std::size_t Runtime::backward_workspace_bytes(const BackwardArgs& args) const {
  const Problem p = validate_backward(args);
  if (p.device == kCpu) return 0;
  return gpu_backward_workspace_bytes(p, device_arch(p.device));
}

}  // namespace flashgen
