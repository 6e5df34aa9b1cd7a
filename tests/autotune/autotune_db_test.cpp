// The persisted winners (runtime/autotune_db.h): JSON round trip, keying by device
// identity and candidate set, concurrent writers in real processes, damaged files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <random>

#include "runtime/autotune_db.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cache/cache_test_support.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::read_bytes;
using testing_support::ScratchDir;
using testing_support::write_bytes;

// Collects what the DB logs.
struct Log {
  std::mutex mutex;
  std::vector<std::string> warnings;
  LogSink sink() {
    return [this](LogLevel level, const std::string& m) {
      std::lock_guard lock(mutex);
      if (level >= LogLevel::warning) warnings.push_back(m);
    };
  }
};

DeviceIdentity h200() {
  DeviceIdentity d;
  d.gpu_name = "NVIDIA H200";
  d.sm_count = 132;
  d.driver_version = 13000;
  d.nvrtc_version = "13.0";
  return d;
}

// The H200 as the tuner stores it: identity, arch and limits.
DeviceProfile on_h200() {
  DeviceProfile p;
  p.identity = h200();
  p.arch = Arch::sm_90a;
  p.limits.max_shared_memory = 227 * 1024;
  return p;
}

TuningKey key(int head_dim, long long bucket, TunedPass pass = TunedPass::forward) {
  TuningKey k;
  k.pass = pass;
  k.head_dim = head_dim;
  k.seqlen_bucket = bucket;
  k.causal = true;
  k.arch = Arch::sm_90a;
  return k;
}

// A non-default candidate of the key's set, with the set's hash.
TunedEntry entry_for(const TuningKey& k, size_t which, double ms) {
  const CandidateSet set = tuning_candidates(k);
  TunedEntry e;
  e.candidate_set = set.hash;
  e.kernels = set.candidates.at(which % set.candidates.size());
  e.median_ms = ms;
  e.heuristic_ms = ms * 1.25;
  e.candidates = static_cast<int>(set.candidates.size());
  e.failed = 1;
  return e;
}

TEST(AutotuneDb, RoundTripThroughTheFile) {
  ScratchDir dir;
  Log log;
  const TuningKey fwd = key(128, 4096), bwd = key(64, 1024, TunedPass::backward);
  std::mt19937 rng(std::random_device{}());
  const double ms = std::uniform_real_distribution<double>(0.1, 10.0)(rng);
  TunedEntry failed_default = entry_for(bwd, 2, ms);
  failed_default.heuristic_ms = std::numeric_limits<double>::infinity();
  {
    TuningDb db(dir.path(), log.sink());
    EXPECT_FALSE(db.find(h200(), fwd, tuning_candidates(fwd).hash));
    db.store(on_h200(), {{fwd, entry_for(fwd, 1, ms)}, {bwd, failed_default}});
  }
  const nlohmann::json file = nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"));
  EXPECT_EQ(file["format"], 1);
  EXPECT_TRUE(file["devices"][h200().key()]["entries"].contains(fwd.name()));

  TuningDb db(dir.path(), log.sink());
  const auto e = db.find(h200(), fwd, tuning_candidates(fwd).hash);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kernels, entry_for(fwd, 1, ms).kernels);
  EXPECT_NE(e->kernels, heuristic_candidate(fwd));
  EXPECT_DOUBLE_EQ(e->median_ms, ms);
  EXPECT_DOUBLE_EQ(e->heuristic_ms, ms * 1.25);
  EXPECT_EQ(e->failed, 1);
  const auto b = db.find(h200(), bwd, tuning_candidates(bwd).hash);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->kernels, failed_default.kernels);
  EXPECT_TRUE(std::isinf(b->heuristic_ms));
  EXPECT_THAT(log.warnings, ::testing::IsEmpty());
}

TEST(AutotuneDb, AnotherDeviceDriverOrVersionDoesNotUseTheWinner) {
  ScratchDir dir;
  Log log;
  const TuningKey k = key(128, 16384);
  TuningDb db(dir.path(), log.sink());
  db.store(on_h200(), {{k, entry_for(k, 1, 2.0)}});
  const std::string hash = tuning_candidates(k).hash;
  EXPECT_TRUE(db.find(h200(), k, hash));
  std::vector<DeviceIdentity> others(5, h200());
  others[0].gpu_name = "NVIDIA H100 80GB HBM3";
  others[1].sm_count = 114;
  others[2].driver_version = 12080;
  others[3].nvrtc_version = "12.9";
  others[4].flashgen_version = "0.0.9";
  for (const DeviceIdentity& d : others) {
    EXPECT_FALSE(db.find(d, k, hash)) << d.key();
    EXPECT_FALSE(TuningDb(dir.path(), log.sink()).find(d, k, hash)) << d.key();
  }
  TuningKey other_bucket = k;
  other_bucket.seqlen_bucket = 4096;
  EXPECT_FALSE(db.find(h200(), other_bucket, hash));
}

TEST(AutotuneDb, AChangedCandidateSetInvalidatesOnlyItsOwnWinner) {
  ScratchDir dir;
  Log log;
  const TuningKey a = key(128, 4096), b = key(64, 4096);
  TuningDb db(dir.path(), log.sink());
  db.store(on_h200(), {{a, entry_for(a, 1, 1.0)}, {b, entry_for(b, 1, 1.0)}});
  EXPECT_FALSE(db.find(h200(), a, "0123456789abcdef0123456789abcdef"));  // a's set changed
  EXPECT_TRUE(db.find(h200(), b, tuning_candidates(b).hash));           // b's did not
  EXPECT_TRUE(db.find(h200(), a, tuning_candidates(a).hash));
}

TEST(AutotuneDb, ConcurrentProcessesKeepEveryEntry) {
  ScratchDir dir;
  constexpr int kWriters = 6, kEach = 5;
  const std::vector<int> dims = {32, 64, 96, 128, 160, 192};
  const long long buckets[kEach] = {256, 1024, 4096, 16384, 65536};
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Each writer stores its entries one at a time, so the writers interleave.
      int status = 0;
      try {
        for (int i = 0; i < kEach; ++i) {
          TuningDb db(dir.path(), nullptr);
          const TuningKey k = key(dims[w], buckets[i]);
          db.store(on_h200(), {{k, entry_for(k, 1 + i, 1.0 + w + 0.1 * i)}});
        }
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const nlohmann::json file = nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"), nullptr, false);
  ASSERT_TRUE(file.is_object()) << "the file does not parse after concurrent writes";
  EXPECT_EQ(file["devices"][h200().key()]["entries"].size(), static_cast<size_t>(kWriters * kEach));
  Log log;
  TuningDb db(dir.path(), log.sink());
  for (int w = 0; w < kWriters; ++w)
    for (int i = 0; i < kEach; ++i) {
      const TuningKey k = key(dims[w], buckets[i]);
      const auto e = db.find(h200(), k, tuning_candidates(k).hash);
      ASSERT_TRUE(e) << k.name();
      EXPECT_DOUBLE_EQ(e->median_ms, 1.0 + w + 0.1 * i);
    }
  EXPECT_THAT(log.warnings, ::testing::IsEmpty());
}

TEST(AutotuneDb, ADamagedFileIsIgnoredWithAWarningAndRewritten) {
  const std::string damaged[] = {"{\"format\": 1, \"devices\": {\"x\": ", "[1, 2, 3]", "{\"format\": 99, \"devices\": {}}",
                                 "{\"format\": \"one\"}", "{\"format\": 1, \"devices\": 7}", std::string("\0\xff\xfe", 3)};
  for (const std::string& bytes : damaged) {
    SCOPED_TRACE(bytes);
    ScratchDir dir;
    write_bytes(dir.path() / "autotune.json", bytes);
    Log log;
    TuningDb db(dir.path(), log.sink());
    ASSERT_EQ(log.warnings.size(), 1u);
    EXPECT_THAT(log.warnings[0], HasSubstr((dir.path() / "autotune.json").string()));
    EXPECT_THAT(log.warnings[0], HasSubstr("damaged"));
    const TuningKey k = key(128, 1024);
    EXPECT_FALSE(db.find(h200(), k, tuning_candidates(k).hash));
    db.store(on_h200(), {{k, entry_for(k, 1, 3.0)}});
    EXPECT_TRUE(nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"), nullptr, false).is_object());
    EXPECT_TRUE(TuningDb(dir.path(), log.sink()).find(h200(), k, tuning_candidates(k).hash));
  }
}

TEST(AutotuneDb, ATamperedEntryFallsBackToTheHeuristicWithAWarning) {
  ScratchDir dir;
  const TuningKey k = key(128, 4096);
  {
    TuningDb db(dir.path(), nullptr);
    db.store(on_h200(), {{k, entry_for(k, 1, 1.0)}});
  }
  nlohmann::json file = nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"));
  nlohmann::json& kernel = file["devices"][h200().key()]["entries"][k.name()]["kernels"][0];
  kernel["block_m"] = 48;  // no longer the kernel its URI names
  write_bytes(dir.path() / "autotune.json", file.dump());
  Log log;
  TuningDb db(dir.path(), log.sink());
  EXPECT_FALSE(db.find(h200(), k, tuning_candidates(k).hash));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr(k.name()));
}

TEST(AutotuneDb, AnUnwritableDirectoryKeepsWinnersInMemory) {
  ScratchDir dir;
  write_bytes(dir.path() / "not-a-directory", "x");
  Log log;
  TuningDb db(dir.path() / "not-a-directory" / "cache", log.sink());
  const TuningKey k = key(64, 256);
  db.store(on_h200(), {{k, entry_for(k, 1, 1.0)}});
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_THAT(log.warnings[0], HasSubstr("cannot write the autotune file"));
  EXPECT_TRUE(db.find(h200(), k, tuning_candidates(k).hash));
}

// A device of this flashgen and NVRTC (what tuned_device considers unnamed).
DeviceProfile local_gpu(const std::string& name, Arch arch) {
  DeviceProfile p = on_h200();
  p.identity.gpu_name = name;
  p.identity.nvrtc_version = nvrtc_version();
  p.arch = arch;
  return p;
}

TEST(AutotuneDb, TheFileRecordsEachDevicesArchAndLimitsForReadersAwayFromTheGpu) {
  ScratchDir dir;
  const TuningKey k = key(128, 4096);
  const DeviceProfile gpu = local_gpu("NVIDIA H200", Arch::sm_90a);
  TuningDb(dir.path(), nullptr).store(gpu, {{k, entry_for(k, 1, 1.0)}});
  const nlohmann::json file = nlohmann::json::parse(read_bytes(dir.path() / "autotune.json"));
  const nlohmann::json& d = file["devices"][gpu.identity.key()];
  EXPECT_EQ(d["arch"], "sm_90a");
  EXPECT_EQ(d["max_shared_memory"], 227 * 1024);
  EXPECT_EQ(d["max_threads_per_block"], 1024);

  const TuningDb db(dir.path(), nullptr);
  const auto found = db.tuned_device(Arch::sm_90a, "", "device");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->identity, gpu.identity);
  EXPECT_EQ(found->limits.max_shared_memory, 227 * 1024);
  EXPECT_EQ(found->arch, Arch::sm_90a);
  EXPECT_FALSE(db.tuned_device(Arch::sm_80, "", "device"));  // no winners for sm_80
  EXPECT_TRUE(db.tuned_device(Arch::sm_90a, "NVIDIA H200", "device"));
  EXPECT_TRUE(db.tuned_device(Arch::sm_90a, gpu.identity.key(), "device"));
}

TEST(AutotuneDb, TunedDeviceIsUnambiguousOrNamed) {
  ScratchDir dir;
  const TuningKey k = key(64, 1024);
  const DeviceProfile a = local_gpu("GPU A", Arch::sm_90a), b = local_gpu("GPU B", Arch::sm_90a);
  DeviceProfile old_flashgen = local_gpu("GPU C", Arch::sm_90a);
  old_flashgen.identity.flashgen_version = "0.0.1";
  {
    TuningDb db(dir.path(), nullptr);
    for (const DeviceProfile& p : {a, b, old_flashgen}) db.store(p, {{k, entry_for(k, 1, 1.0)}});
  }
  const TuningDb db(dir.path(), nullptr);
  try {
    db.tuned_device(Arch::sm_90a, "", "--device");
    ADD_FAILURE() << "two devices hold sm_90a winners: expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--device: "));
    EXPECT_THAT(e.what(), HasSubstr("from 2 devices"));
    EXPECT_THAT(e.what(), HasSubstr(a.identity.key()));
    EXPECT_THAT(e.what(), HasSubstr(b.identity.key()));
  }
  EXPECT_EQ(db.tuned_device(Arch::sm_90a, "GPU B", "--device")->identity, b.identity);
  // Another flashgen's winners: only by the full key, as the runtime would never use them.
  EXPECT_THROW(db.tuned_device(Arch::sm_90a, "GPU C", "--device"), Error);
  EXPECT_EQ(db.tuned_device(Arch::sm_90a, old_flashgen.identity.key(), "--device")->identity, old_flashgen.identity);
  try {
    db.tuned_device(Arch::sm_90a, "GPU Z", "device");
    ADD_FAILURE() << "expected an error for a device the file does not hold";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device: 'GPU Z' names no device of"));
  }
}

}  // namespace
}  // namespace flashgen
