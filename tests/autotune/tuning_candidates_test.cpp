// Candidate sets of the autotuner (compiler/tuning_candidates.h): every candidate is a
// legal spec for its arch, the heuristic default is always first, the dQ strategy follows
// `deterministic`, device limits prune, and the set hash is stable and order-sensitive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "compiler/kernel_selection.h"
#include "compiler/tuning_candidates.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;

std::vector<TuningKey> all_keys() {
  std::vector<TuningKey> out;
  for (TunedPass pass : {TunedPass::forward, TunedPass::backward})
    for (int d : {32, 59, 64, 96, 128, 160, 192, 256})
      for (DType t : {DType::bf16, DType::f16})
        for (int flags = 0; flags < (pass == TunedPass::forward ? 8 : 16); ++flags)  // a forward key is never deterministic
          for (Arch a : {Arch::sm_80, Arch::sm_86, Arch::sm_90a}) {
            TuningKey k;
            k.pass = pass;
            k.head_dim = d;
            k.dtype = t;
            k.causal = flags & 1;
            k.window = flags & 2;
            k.softcap = flags & 4;
            k.deterministic = flags & 8;
            k.arch = a;
            out.push_back(k);
          }
  return out;
}

TEST(TuningCandidates, EveryCandidateIsLegalAndTheDefaultComesFirst) {
  for (const TuningKey& key : all_keys()) {
    SCOPED_TRACE(key.name());
    const CandidateSet set = tuning_candidates(key);
    ASSERT_FALSE(set.candidates.empty());
    EXPECT_EQ(set.candidates.front(), heuristic_candidate(key));
    std::set<std::string> names;
    for (const Candidate& c : set.candidates) {
      EXPECT_TRUE(names.insert(candidate_name(c)).second) << "duplicate " << candidate_name(c);
      ASSERT_EQ(c.size(), set.candidates.front().size());
      for (size_t i = 0; i < c.size(); ++i) {
        const KernelSpec& s = c[i];
        EXPECT_EQ(s.pass, set.candidates.front()[i].pass);
        EXPECT_THAT(s.problems(), ::testing::IsEmpty()) << s.uri();
        EXPECT_LE(s.shared_memory_bytes(), max_shared_memory(key.arch)) << s.uri();
        EXPECT_EQ(s.head_dim, key.head_dim);
        EXPECT_EQ(s.dtype, key.dtype);
        EXPECT_EQ(s.causal, key.causal);
        EXPECT_EQ(s.window, key.window);
        EXPECT_EQ(s.softcap, key.softcap);
        EXPECT_EQ(s.deterministic, key.deterministic);
        EXPECT_EQ(s.arch, key.arch);
      }
    }
  }
}

// sm_90a forward keys time the heuristic's warp-specialised tiles in both schedulings, one
// CTA per tile and persistent (unmasked, the heuristic's; masked, the longest-first snake), up
// to d128; at d256 the masked persistent form is refused (it spills).
TEST(TuningCandidates, TheHeuristicTilesAreTimedInBothSchedulings) {
  for (int d : {64, 128, 256})
    for (bool causal : {false, true})
      for (long long bucket : {1024LL, 16384LL}) {
        TuningKey key;
        key.pass = TunedPass::forward;
        key.head_dim = d;
        key.dtype = DType::bf16;
        key.causal = causal;
        key.arch = Arch::sm_90a;
        key.seqlen_bucket = bucket;
        SCOPED_TRACE(key.name());
        const CandidateSet set = tuning_candidates(key);
        const KernelSpec& def = set.candidates.front().front();
        ASSERT_EQ(def.pass, Pass::fwd);
        ASSERT_TRUE(def.warp_specialized());
        EXPECT_EQ(def.persistent, !causal) << "the selection's scheduling";
        bool other = false;
        for (const Candidate& c : set.candidates) {
          const KernelSpec& s = c.front();
          other |= s.block_m == def.block_m && s.block_n == def.block_n && s.persistent != def.persistent;
        }
        EXPECT_EQ(other, !(causal && d == 256)) << "the other scheduling of " << def.uri();
      }
}

TEST(TuningCandidates, TheDqStrategyFollowsDeterministic) {
  for (const TuningKey& key : all_keys()) {
    if (key.pass != TunedPass::backward) continue;
    SCOPED_TRACE(key.name());
    for (const Candidate& c : tuning_candidates(key).candidates) {
      std::vector<Pass> passes;
      for (const KernelSpec& s : c) passes.push_back(s.pass);
      const Pass dq = key.deterministic ? Pass::bwd_dq : Pass::bwd_dq_convert;
      EXPECT_EQ(passes, (std::vector<Pass>{Pass::bwd_preprocess, Pass::bwd_dkdv, dq}));
    }
  }
}

TEST(TuningCandidates, TheStandardKeysHaveSeveralCandidates) {
  for (int d : {64, 128})
    for (TunedPass pass : {TunedPass::forward, TunedPass::backward}) {
      TuningKey k;
      k.pass = pass;
      k.head_dim = d;
      k.arch = Arch::sm_90a;
      const size_t n = tuning_candidates(k).candidates.size();
      EXPECT_GE(n, 4u) << k.name();
      EXPECT_LE(n, 24u) << k.name() << ": a set this large makes the tuning of the standard set too slow";
    }
}

TEST(TuningCandidates, DeviceLimitsPruneButNeverTheDefault) {
  TuningKey k;
  k.head_dim = 128;
  k.arch = Arch::sm_90a;
  for (TunedPass pass : {TunedPass::forward, TunedPass::backward}) {
    k.pass = pass;
    const CandidateSet all = tuning_candidates(k);
    DeviceLimits small;
    small.max_shared_memory = 72 * 1024;
    const CandidateSet pruned = tuning_candidates(k, small);
    EXPECT_LT(pruned.candidates.size(), all.candidates.size()) << k.name();
    EXPECT_NE(pruned.hash, all.hash);
    EXPECT_EQ(pruned.candidates.front(), all.candidates.front());
    for (size_t c = 1; c < pruned.candidates.size(); ++c)
      for (const KernelSpec& s : pruned.candidates[c]) EXPECT_LE(s.shared_memory_bytes(), small.max_shared_memory);

    DeviceLimits few_threads;
    few_threads.max_threads_per_block = 128;
    const CandidateSet narrow = tuning_candidates(k, few_threads);  // a named set: the loop reads into it
    for (size_t c = 1; c < narrow.candidates.size(); ++c)
      for (const KernelSpec& s : narrow.candidates[c]) EXPECT_LE(s.threads(), 128);
  }
}

TEST(TuningCandidates, SetsDifferByKey) {
  TuningKey base;
  base.head_dim = 128;
  base.arch = Arch::sm_90a;
  std::vector<TuningKey> variants(7, base);
  variants[1].head_dim = 64;
  variants[2].dtype = DType::f16;
  variants[3].causal = true;
  variants[4].pass = TunedPass::backward;
  variants[5].pass = TunedPass::backward, variants[5].deterministic = true;
  variants[6].arch = Arch::sm_80;
  std::set<std::string> hashes;
  for (const TuningKey& k : variants) hashes.insert(tuning_candidates(k).hash);
  EXPECT_EQ(hashes.size(), variants.size());
  // The head dim changes which tiles are tried, not only the specs' fields.
  TuningKey d256 = base;
  d256.head_dim = 256;
  std::set<std::pair<int, int>> tiles128, tiles256;
  for (const Candidate& c : tuning_candidates(base).candidates) tiles128.insert({c[0].block_m, c[0].block_n});
  for (const Candidate& c : tuning_candidates(d256).candidates) tiles256.insert({c[0].block_m, c[0].block_n});
  EXPECT_NE(tiles128, tiles256);
}

TEST(TuningCandidates, SetHashIsStableAndSeesEveryChange) {
  TuningKey k;
  k.pass = TunedPass::backward;
  k.head_dim = 96;
  k.arch = Arch::sm_90a;
  const CandidateSet a = tuning_candidates(k), b = tuning_candidates(k);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.hash.size(), 32u);
  EXPECT_EQ(a.hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(candidate_set_hash(a.candidates), a.hash);
  // Another bucket of the same kernels: the same set (the bucket is in the entry's name).
  TuningKey longer = k;
  longer.seqlen_bucket = 16384;
  EXPECT_EQ(tuning_candidates(longer).hash, a.hash);

  ASSERT_GE(a.candidates.size(), 3u);
  std::vector<Candidate> reordered = a.candidates;
  std::swap(reordered[1], reordered[2]);
  EXPECT_NE(candidate_set_hash(reordered), a.hash);
  std::vector<Candidate> fewer(a.candidates.begin(), a.candidates.end() - 1);
  EXPECT_NE(candidate_set_hash(fewer), a.hash);
  std::vector<Candidate> changed = a.candidates;
  changed.back()[1].stages = changed.back()[1].stages == 1 ? 2 : 1;
  EXPECT_NE(candidate_set_hash(changed), a.hash);
}

TEST(TuningCandidates, SeqlenBucketsArePowersOfFourNearestInLogScale) {
  EXPECT_EQ(seqlen_bucket(1, 1), 256);
  EXPECT_EQ(seqlen_bucket(511, 3), 256);
  EXPECT_EQ(seqlen_bucket(512, 512), 1024);
  EXPECT_EQ(seqlen_bucket(1000, 1), 1024);
  EXPECT_EQ(seqlen_bucket(2047, 2047), 1024);
  EXPECT_EQ(seqlen_bucket(2048, 100), 4096);
  EXPECT_EQ(seqlen_bucket(100, 20000), 16384);
  EXPECT_EQ(seqlen_bucket(40000, 40000), 65536);
}

TEST(TuningCandidates, KeysHaveReadableNamesAndTuningProblems) {
  ProblemKey p;
  p.head_dim = 128;
  p.causal = true;
  p.seqlen_q = 3000;
  p.seqlen_k = 5000;
  p.batch = 7;
  const TuningKey k = tuning_key(p, TunedPass::forward, Arch::sm_90a);
  EXPECT_EQ(k.name(), "fwd_d128_bf16_causal_n4096_sm_90a");
  p.dtype = DType::f16;
  p.deterministic = true;
  p.softcap = true;
  p.window = true;
  EXPECT_EQ(tuning_key(p, TunedPass::backward, Arch::sm_80).name(), "bwd_d128_fp16_causal_window_softcap_det_n4096_sm_80");

  for (long long bucket : {256LL, 1024LL, 16384LL, 65536LL}) {
    TuningKey t = k;
    t.seqlen_bucket = bucket;
    const ProblemKey tp = tuning_problem(t);
    EXPECT_EQ(tp.seqlen_q, bucket);
    EXPECT_EQ(tp.seqlen_k, bucket);
    EXPECT_EQ(tp.batch * tp.seqlen_q, std::max(16384LL, bucket));
    EXPECT_EQ(tp.heads_q * tp.head_dim, 2048);
    EXPECT_TRUE(tp.causal);
  }
}

}  // namespace
}  // namespace flashgen
