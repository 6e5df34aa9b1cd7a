// What the autotuner tries for a problem: a candidate set per tuning key, i.e. per
// (pass, head_dim, dtype, causal/window/softcap, deterministic, seqlen bucket, arch).
// A candidate is the complete list of kernels one pass launches, so a backward
// candidate is timed as a whole backward (preprocess + dK/dV + dQ). The heuristic
// table (kernel_selection.h) gives each set's first candidate, so the default is
// always among those timed. Pure data: no device, no compiler.
#pragma once

#include <string>
#include <vector>

#include "compiler/kernel_selection.h"
#include "compiler/kernel_spec.h"

namespace flashgen {

enum class TunedPass : int { forward = 0, backward = 1 };
const char* to_string(TunedPass p);

// Sequence lengths tuned for: powers of 4 from 256 (256, 1k, 4k, 16k, 64k, ...). A
// problem belongs to the bucket nearest (in log scale) to max(seqlen_q, seqlen_k).
long long seqlen_bucket(long long seqlen_q, long long seqlen_k);

struct TuningKey : ProblemOptions {
  TunedPass pass = TunedPass::forward;
  long long seqlen_bucket = 4096;
  Arch arch = Arch::sm_80;

  // Readable and unique: fwd_d128_bf16_causal_n4096_sm_90a (the tuning file's entry name).
  std::string name() const;
  bool operator==(const TuningKey&) const = default;
};

TuningKey tuning_key(const ProblemKey& problem, TunedPass pass, Arch arch);

// The problem a key is timed on: seqlen_q = seqlen_k = the bucket, batch * seqlen = 16k
// tokens and heads * head_dim = 2048 (FlashAttention's benchmark convention), GQA-free.
ProblemKey tuning_problem(const TuningKey& key);

// Kernels of one candidate in launch order (as select_*_kernels returns them).
using Candidate = std::vector<KernelSpec>;
// "bwd_preprocess_...+bwd_dkdv_...+bwd_dq_convert_..."
std::string candidate_name(const Candidate& c);

// The device limits candidates are pruned by; 0 means the arch's own limit.
struct DeviceLimits {
  int max_shared_memory = 0;        // opt-in dynamic shared memory per block, bytes
  int max_threads_per_block = 1024;
};

struct CandidateSet {
  TuningKey key;
  std::vector<Candidate> candidates;  // [0] is the heuristic default
  // XXH3-128 (hex) of the candidates' spec hashes in order: a change of the set
  // (a tile added, a rule changed) changes it, and the persisted winner is retuned.
  std::string hash;
};

// The set hash of candidates in this order (CandidateSet::hash).
std::string candidate_set_hash(const std::vector<Candidate>& candidates);

// The heuristic table's choice for the key (select_forward/backward_kernels).
Candidate heuristic_candidate(const TuningKey& key);

// Tile configs (block_m, block_n, warps, stages) of the pass's varied kernel, each kept
// only when every kernel passes KernelSpec::problems(), fits `limits` and is not expected
// to spill (accumulators per thread, see tuning_candidates.cpp). The dQ strategy follows
// the key: atomic dQ (bwd_dkdv + bwd_dq_convert) normally, the separate bwd_dq kernel
// only when deterministic gradients are asked for. The default comes first, no duplicates.
CandidateSet tuning_candidates(const TuningKey& key, const DeviceLimits& limits = {});

}  // namespace flashgen
