// Which kernels the runtime launches for a problem, by autotune policy: the persisted
// winner of the problem's tuning key on this device (same candidate set), else the
// heuristic table. The lookup is resolved once per (device, key) and remembered, so the
// hot path pays a map lookup; nothing here ever tunes except tune_declared().
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/kernel_selection.h"
#include "compiler/tuning_candidates.h"
#include "flashgen/flashgen.hpp"
#include "runtime/autotune.h"
#include "runtime/autotune_db.h"

namespace flashgen {

class KernelSelector {
 public:
  // `policy` as resolved by effective_autotune_policy; `dir` holds autotune.json (read on
  // first use, never under `off`).
  KernelSelector(AutotunePolicy policy, std::filesystem::path dir, LogSink log);

  AutotunePolicy policy() const { return policy_; }

  // Kernels in launch order for `problem` on the device (ordinal `device`, described by `profile`).
  Candidate select(const ProblemKey& problem, TunedPass pass, const DeviceProfile& profile, int device);

  // startup: tunes the keys without a persisted winner; full: retunes them all; off and
  // cached: nothing (the timer is never called). Later select() calls see the winners.
  std::vector<TuneResult> tune_declared(std::span<const TuningKey> keys, const TunerOptions& options);
  // Any policy: tunes now (retune: even keys with a winner). For Runtime::tune and `flashgen tune`.
  std::vector<TuneResult> tune(std::span<const TuningKey> keys, bool retune, const TunerOptions& options);

  TuningDb& db();

 private:
  AutotunePolicy policy_;
  std::filesystem::path dir_;
  LogSink log_;
  std::once_flag db_once_;
  std::unique_ptr<TuningDb> db_;
  // (device, key) -> the persisted winner, or nullopt: the heuristic table.
  struct MemoKey {
    int device;
    TuningKey key;
    bool operator==(const MemoKey&) const = default;
  };
  struct MemoKeyHash {
    std::size_t operator()(const MemoKey& k) const;
  };
  std::shared_mutex memo_mutex_;
  std::unordered_map<MemoKey, std::optional<Candidate>, MemoKeyHash> memo_;
};

}  // namespace flashgen
