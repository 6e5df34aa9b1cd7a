// Candidate sets of the autotuner. Each varied kernel gets a grid of tile configs;
// configs that the spec rejects, that exceed the device's limits, or that would keep
// too many fp32 accumulators per thread (they spill: measured with ptxas, see
// docs/perf-notes.md) are dropped before anything is compiled.
#include "compiler/tuning_candidates.h"

#include "compiler/spec_fields.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <initializer_list>

namespace flashgen {
namespace {

struct Tiles {
  int block_m, block_n, warps;
};

int accumulator_budget(const KernelSpec& s) {
  // The warp-specialised forward's consumers hold 240 registers with two warpgroups, 160 with
  // three (FwdKernelSm90's split): S, P (half of S) and O must fit with the addresses.
  // The dK/dV kernel's consumers hold dK, dV, S^T and dP^T (192 at d128, 208 on its 80-query
  // tiles, which compile without spills) in 240.
  if (s.warp_specialized() && s.pass == Pass::bwd_dkdv) return 208;
  if (s.warp_specialized()) return s.consumer_warpgroups() == 2 ? 176 : 96;
  switch (s.pass) {
    case Pass::fwd: return 128;
    case Pass::bwd_dkdv: return 160;
    case Pass::bwd_dq: return 144;
    case Pass::fwd_splitkv: return kDecodeAccumulatorBudget;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
    case Pass::fwd_combine:
    case Pass::kv_append: return 0;
  }
  return 0;
}

bool fits(const KernelSpec& s, const DeviceLimits& limits) {
  if (!s.problems().empty()) return false;
  if (limits.max_shared_memory > 0 && s.shared_memory_bytes() > limits.max_shared_memory) return false;
  if (s.threads() > limits.max_threads_per_block) return false;
  return s.accumulators_per_thread() <= accumulator_budget(s);  // above the budget ptxas spills
}

std::vector<Tiles> grid(std::initializer_list<int> ms, std::initializer_list<int> ns, std::initializer_list<int> ws) {
  std::vector<Tiles> out;
  for (int m : ms)
    for (int n : ns)
      for (int w : ws) out.push_back({m, n, w});
  return out;
}

// Tile grids by pass and padded head dim. Large head dims get narrower key tiles.
std::vector<Tiles> forward_tiles(int d) {
  if (d > 160) return grid({64, 128}, {16, 32}, {4, 8});
  return grid({64, 128}, {32, 64, 128}, {4, 8});
}
// The sm_90a warp-specialised forward: 128 or 192 query rows (one producer warpgroup plus two
// or three consumers), key tiles in 16-row steps that fit its register and memory budget.
std::vector<Tiles> forward_ws_tiles() {
  std::vector<Tiles> out;
  for (int m : {128, 192})
    for (int n : {64, 80, 96, 112, 128, 144, 176}) out.push_back({m, n, 4 * (m / 64 + 1)});
  return out;
}
// The warp-specialised dK/dV kernel: two consumer warpgroups of 64 keys over 64-, (d64)
// 128- or (d128) 80-query tiles; at d256 both on the same 64 keys (KernelSpec::problems keeps each where it fits).
std::vector<Tiles> dkdv_ws_tiles() { return {{64, 128, 12}, {128, 128, 12}, {80, 128, 12}, {64, 64, 12}}; }
std::vector<Tiles> dkdv_tiles(int d) {
  if (d > 128) return grid({16, 32, 64}, {32, 64}, {4, 8});
  return grid({32, 64, 128}, {64, 128}, {4, 8});
}
std::vector<Tiles> dq_tiles(int d) {
  if (d > 160) return grid({64, 128}, {16, 32}, {4, 8});
  return grid({64, 128}, {32, 64}, {4, 8});
}

// Forward kernels pipeline K/V with two stages whenever they fit (one otherwise); the
// backward kernels' Q/dO pipeline is tried with one and two stages.
std::vector<int> stages_for(Pass p) { return p == Pass::fwd ? std::vector<int>{2} : std::vector<int>{1, 2}; }

// Every candidate that replaces the kernel at `slot` of `base` by a config of `tiles`.
void vary(const Candidate& base, size_t slot, const std::vector<Tiles>& tiles, const DeviceLimits& limits,
          std::vector<Candidate>& out) {
  const Pass pass = base[slot].pass;
  for (const Tiles& t : tiles) {
    for (int stages : stages_for(pass)) {
      Candidate c = base;
      KernelSpec& s = c[slot];
      s.block_m = t.block_m;
      s.block_n = t.block_n;
      s.warps = t.warps;
      s.stages = stages;
      s.persistent = false;  // the heuristic's tiles alone are tried in both forms (tuning_candidates)
      if (!fits(s, limits) && pass == Pass::fwd && stages > 1) s.stages = 1;
      if (!fits(s, limits)) continue;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
    }
  }
}

size_t slot_of(const Candidate& c, Pass p) {
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].pass == p) return i;
  return c.size();
}

}  // namespace

std::string candidate_set_hash(const std::vector<Candidate>& candidates) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const std::string version = "flashgen tuning candidates 1\n";
  XXH3_128bits_update(&state, version.data(), version.size());
  for (const Candidate& c : candidates) {
    for (const KernelSpec& s : c) {
      const std::string h = s.hash() + ",";
      XXH3_128bits_update(&state, h.data(), h.size());
    }
    XXH3_128bits_update(&state, ";", 1);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

const char* to_string(TunedPass p) { return p == TunedPass::forward ? "fwd" : "bwd"; }

long long seqlen_bucket(long long seqlen_q, long long seqlen_k) {
  const long long n = std::max({seqlen_q, seqlen_k, 1LL});
  long long bucket = 256;
  // The geometric midpoint between b and 4b is 2b.
  while (n >= 2 * bucket && bucket < (1LL << 40)) bucket *= 4;
  return bucket;
}

std::string TuningKey::name() const {
  std::string s = to_string(pass);
  for_each_problem_field([&](const auto& field) { s += uri_part(field, this->*field.member); });
  return s + fmt::format("_n{}_{}", seqlen_bucket, to_string(arch));
}

TuningKey tuning_key(const ProblemKey& p, TunedPass pass, Arch arch) {
  TuningKey k;
  static_cast<ProblemOptions&>(k) = p;
  k.pass = pass;
  k.deterministic = p.deterministic && pass == TunedPass::backward;  // the forward's kernels ignore it
  k.seqlen_bucket = seqlen_bucket(p.seqlen_q, p.seqlen_k);
  k.arch = arch;
  return k;
}

ProblemKey tuning_problem(const TuningKey& key) {
  ProblemKey p;
  static_cast<ProblemOptions&>(p) = key;
  p.seqlen_q = p.seqlen_k = key.seqlen_bucket;
  p.batch = std::max(1LL, 16384 / key.seqlen_bucket);
  p.heads_q = p.heads_kv = std::max(1, 2048 / key.head_dim);
  return p;
}

std::string candidate_name(const Candidate& c) {
  std::string out;
  for (const KernelSpec& s : c) out += (out.empty() ? "" : "+") + s.uri();
  return out;
}

Candidate heuristic_candidate(const TuningKey& key) {
  const ProblemKey p = tuning_problem(key);
  return key.pass == TunedPass::forward ? select_forward_kernels(p, key.arch) : select_backward_kernels(p, key.arch);
}

CandidateSet tuning_candidates(const TuningKey& key, const DeviceLimits& limits) {
  CandidateSet set;
  set.key = key;
  const Candidate def = heuristic_candidate(key);
  set.candidates.push_back(def);
  const int d = def.front().padded_head_dim();
  if (key.pass == TunedPass::forward) {
    vary(def, slot_of(def, Pass::fwd), forward_tiles(d), limits, set.candidates);
    if (key.arch == Arch::sm_90a && key.head_dim % 8 == 0)
      vary(def, slot_of(def, Pass::fwd), forward_ws_tiles(), limits, set.candidates);
    // The heuristic's warp-specialised tiles in the other scheduling (persistent or one CTA
    // per tile): the one A/B the selection's persistent rule rests on.
    Candidate other = def;
    KernelSpec& fwd = other[slot_of(other, Pass::fwd)];
    fwd.persistent = !fwd.persistent;
    if (fwd.warp_specialized() && fits(fwd, limits) &&
        std::find(set.candidates.begin(), set.candidates.end(), other) == set.candidates.end())
      set.candidates.push_back(std::move(other));
  } else {
    vary(def, slot_of(def, Pass::bwd_dkdv), dkdv_tiles(d), limits, set.candidates);
    if (key.arch == Arch::sm_90a && key.head_dim % 8 == 0)
      vary(def, slot_of(def, Pass::bwd_dkdv), dkdv_ws_tiles(), limits, set.candidates);
    // Deterministic: dQ tiles beside the default dK/dV kernel (the two kernels' times add).
    if (key.deterministic) vary(def, slot_of(def, Pass::bwd_dq), dq_tiles(d), limits, set.candidates);
  }
  set.hash = candidate_set_hash(set.candidates);
  return set;
}

}  // namespace flashgen
