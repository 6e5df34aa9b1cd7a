#include "runtime/autotune_selection.h"

#include <xxhash.h>

namespace flashgen {

std::size_t KernelSelector::MemoKeyHash::operator()(const MemoKey& m) const {
  const TuningKey& k = m.key;
  const long long fields[] = {m.device,  static_cast<int>(k.pass), k.head_dim,     static_cast<int>(k.dtype),
                              k.causal,  k.window,                 k.softcap,      k.deterministic,
                              k.seqlen_bucket, static_cast<int>(k.arch)};
  return static_cast<std::size_t>(XXH3_64bits(fields, sizeof fields));
}

KernelSelector::KernelSelector(AutotunePolicy policy, std::filesystem::path dir, LogSink log)
    : policy_(policy), dir_(std::move(dir)), log_(std::move(log)) {}

TuningDb& KernelSelector::db() {
  std::call_once(db_once_, [&] { db_ = std::make_unique<TuningDb>(dir_, log_); });
  return *db_;
}

Candidate KernelSelector::select(const ProblemKey& problem, TunedPass pass, const DeviceProfile& profile, int device) {
  auto heuristic = [&] {
    return pass == TunedPass::forward ? select_forward_kernels(problem, profile.arch)
                                      : select_backward_kernels(problem, profile.arch);
  };
  if (policy_ == AutotunePolicy::off) return heuristic();

  const TuningKey key = tuning_key(problem, pass, profile.arch);
  const MemoKey memo_key{device, key};
  {
    std::shared_lock lock(memo_mutex_);
    if (auto it = memo_.find(memo_key); it != memo_.end()) return it->second ? *it->second : heuristic();
  }
  // The winner's set must be today's set for this key: a changed set means a stale winner.
  std::optional<Candidate> winner;
  if (auto e = db().find(profile.identity, key, tuning_candidates(key, profile.limits).hash))
    winner = std::move(e->kernels);
  std::unique_lock lock(memo_mutex_);
  const auto& memo = memo_.emplace(memo_key, std::move(winner)).first->second;
  return memo ? *memo : heuristic();
}

std::vector<TuneResult> KernelSelector::tune_declared(std::span<const TuningKey> keys, const TunerOptions& options) {
  if (policy_ != AutotunePolicy::startup && policy_ != AutotunePolicy::full) return {};
  return tune(keys, policy_ == AutotunePolicy::full, options);
}

std::vector<TuneResult> KernelSelector::tune(std::span<const TuningKey> keys, bool retune, const TunerOptions& options) {
  std::vector<TuneResult> results = autotune(db(), keys, retune, options);
  std::unique_lock lock(memo_mutex_);
  memo_.clear();  // the next select() reads the new winners
  return results;
}

}  // namespace flashgen
