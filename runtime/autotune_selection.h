// Which kernels run a problem: the one selection rule, shared by the runtime, the CLI and
// the MLIR pass (--flash-select-kernels): the winner persisted for the problem's tuning key
// on the device (tuned from today's candidate set), else the heuristic table
// (compiler/kernel_selection.h). KernelSelector applies it for a Runtime by autotune policy,
// resolving the lookup once per (device, key), so the hot path pays a map lookup; nothing
// here ever tunes except tune_declared(). TunedSelection applies it away from the GPU.
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

// The winner `db` holds for `key` on `device`, if it was tuned from today's candidate set.
std::optional<Candidate> persisted_winner(const TuningDb& db, const DeviceProfile& device, const TuningKey& key);

// The rule: persisted_winner (db null: none), else the heuristic table for device.arch.
Candidate select_kernels(const ProblemKey& problem, TunedPass pass, const DeviceProfile& device, const TuningDb* db);

// The rule away from the GPU (the MLIR pass, `flashgen dump`): the winners of the device
// TuningDb::tuned_device picks in <dir>/autotune.json (named by `device`, else the sole one
// with winners for `arch`); no tuning dir: the heuristic table. `dir_option` and
// `device_option` name the front end's options in errors.
class TunedSelection {
 public:
  struct Options {
    std::filesystem::path dir;  // holds autotune.json; empty: heuristic only
    std::string device;         // GPU name or device key; empty: the sole device for the arch
    Arch arch = Arch::sm_80;
    std::string dir_option = "tuning-dir";
    std::string device_option = "device";
    LogSink log;
  };
  // Throws Error(invalid_argument) naming an option: a device without a dir, a dir without
  // autotune.json, a device the file does not hold (TuningDb::tuned_device).
  explicit TunedSelection(Options options);

  Candidate select(const ProblemKey& problem, TunedPass pass) const;
  // The device whose winners are used; nullopt: the heuristic table only.
  const std::optional<DeviceProfile>& device() const { return device_; }

 private:
  Arch arch_;
  std::unique_ptr<TuningDb> db_;
  std::optional<DeviceProfile> device_;
};

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
