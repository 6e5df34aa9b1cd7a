// Placeholder until its owner lands the implementation.
#include "runtime/kernel_cache.h"
namespace flashgen {
struct KernelCache::Impl { std::filesystem::path dir; };
KernelCache::KernelCache(std::filesystem::path dir) : impl_(std::make_unique<Impl>()) { impl_->dir = std::move(dir); }
KernelCache::~KernelCache() = default;
const CompiledKernel& KernelCache::get(const KernelSpec& spec) { throw Error(Status::unsupported, "kernel cache: not yet available for " + spec.uri()); }
std::vector<const CompiledKernel*> KernelCache::get_many(std::span<const KernelSpec> specs) { std::vector<const CompiledKernel*> out; for (auto& s : specs) out.push_back(&get(s)); return out; }
LoadedKernel KernelCache::load(const KernelSpec& spec) { get(spec); return {}; }
std::string KernelCache::key(const KernelSpec& spec) const { return spec.hash(); }
std::filesystem::path KernelCache::entry_dir(const KernelSpec& spec) const { return impl_->dir / spec.uri(); }
const std::filesystem::path& KernelCache::dir() const { return impl_->dir; }
CacheStats KernelCache::stats() const { return {}; }
}  // namespace flashgen
