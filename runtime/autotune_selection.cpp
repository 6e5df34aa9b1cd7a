#include "runtime/autotune_selection.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <array>

#include "compiler/spec_fields.h"

namespace flashgen {

std::size_t KernelSelector::MemoKeyHash::operator()(const MemoKey& m) const {
  const TuningKey& k = m.key;
  std::array<long long, 4 + kProblemFieldCount> fields = {m.device, static_cast<int>(k.pass), k.seqlen_bucket,
                                                           static_cast<int>(k.arch)};
  const auto options = problem_field_values(k);
  std::copy(options.begin(), options.end(), fields.begin() + 4);
  return static_cast<std::size_t>(XXH3_64bits(fields.data(), sizeof fields));
}

KernelSelector::KernelSelector(AutotunePolicy policy, std::filesystem::path dir, LogSink log)
    : policy_(policy), dir_(std::move(dir)), log_(std::move(log)) {}

TuningDb& KernelSelector::db() {
  std::call_once(db_once_, [&] { db_ = std::make_unique<TuningDb>(dir_, log_); });
  return *db_;
}

std::optional<Candidate> persisted_winner(const TuningDb& db, const DeviceProfile& device, const TuningKey& key) {
  // The winner's set must be today's set for this key: a changed set means a stale winner.
  if (auto e = db.find(device.identity, key, tuning_candidates(key, device.limits).hash)) return std::move(e->kernels);
  return std::nullopt;
}

Candidate select_kernels(const ProblemKey& problem, TunedPass pass, const DeviceProfile& device, const TuningDb* db) {
  // A decode forward's tuning key would name the prefill shapes of its seqlen bucket: it
  // keeps the heuristic's split-KV kernels (tuning them is a decode key of its own, not yet).
  if (pass == TunedPass::forward && decode_shaped(problem)) db = nullptr;
  if (db)
    if (auto winner = persisted_winner(*db, device, tuning_key(problem, pass, device.arch))) return *winner;
  return pass == TunedPass::forward ? select_forward_kernels(problem, device.arch)
                                    : select_backward_kernels(problem, device.arch);
}

TunedSelection::TunedSelection(Options o) : arch_(o.arch) {
  if (o.dir.empty()) {
    if (!o.device.empty())
      throw Error(Status::invalid_argument,
                  fmt::format("{}: '{}' needs {} (the directory holding autotune.json)", o.device_option, o.device,
                              o.dir_option));
    return;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.dir / TuningDb::kFileName, ec))
    throw Error(Status::invalid_argument,
                fmt::format("{}: {} holds no {} (written by `flashgen tune` or Runtime::tune)", o.dir_option,
                            o.dir.string(), TuningDb::kFileName));
  db_ = std::make_unique<TuningDb>(o.dir, o.log);
  device_ = db_->tuned_device(o.arch, o.device, o.device_option);
}

Candidate TunedSelection::select(const ProblemKey& problem, TunedPass pass) const {
  if (device_) return select_kernels(problem, pass, *device_, db_.get());
  DeviceProfile arch_only;
  arch_only.arch = arch_;
  return select_kernels(problem, pass, arch_only, nullptr);
}

Candidate KernelSelector::select(const ProblemKey& problem, TunedPass pass, const DeviceProfile& profile, int device) {
  if (policy_ == AutotunePolicy::off || (pass == TunedPass::forward && decode_shaped(problem)))
    return select_kernels(problem, pass, profile, nullptr);

  // select_kernels' answer, with the file lookup memoised.
  const MemoKey memo_key{device, tuning_key(problem, pass, profile.arch)};
  {
    std::shared_lock lock(memo_mutex_);
    if (auto it = memo_.find(memo_key); it != memo_.end())
      return it->second ? *it->second : select_kernels(problem, pass, profile, nullptr);
  }
  std::optional<Candidate> winner = persisted_winner(db(), profile, memo_key.key);
  {
    std::unique_lock lock(memo_mutex_);
    memo_.emplace(memo_key, winner);
  }
  return winner ? std::move(*winner) : select_kernels(problem, pass, profile, nullptr);
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
