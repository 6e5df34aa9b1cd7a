// The heuristic table: for each pass, candidate tile configs by head dim, best
// first; the first that passes KernelSpec::validate() for the arch (shared memory,
// warp split rules) wins. Starting points are FlashAttention-2's choices for the
// sm_80+ mma.sync path.
#include "compiler/kernel_selection.h"

#include "compiler/tuning_candidates.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

namespace flashgen {
namespace {

struct Tiles {
  int block_m, block_n, warps, stages;
  bool persistent = false;
};

KernelSpec base_spec(const ProblemKey& p, Pass pass, Arch arch) {
  KernelSpec s;
  static_cast<ProblemOptions&>(s) = p;
  s.pass = pass;
  s.arch = arch;
  s.paged = p.paged && pass == Pass::fwd_splitkv;  // only that kernel reads the pages
  s.deterministic = p.deterministic && is_backward(pass);
  return s;
}

KernelSpec first_valid(KernelSpec s, std::initializer_list<Tiles> candidates) {
  for (const Tiles& t : candidates) {
    s.block_m = t.block_m;
    s.block_n = t.block_n;
    s.warps = t.warps;
    s.stages = t.stages;
    s.persistent = t.persistent;
    if (s.problems().empty()) return s;
  }
  s.validate();  // throws with the last candidate's problems
  return s;
}

// Every list ends with configs small enough for the 99 KB of sm_86/sm_89. The first
// entries were checked for zero spills with ptxas (docs/perf-notes.md, "kernels").
KernelSpec forward_spec(const ProblemKey& p, Arch arch) {
  const KernelSpec s = base_spec(p, Pass::fwd, arch);
  const int d = s.padded_head_dim();
  // sm_90a with 16-byte rows: the warp-specialised kernel (KernelSpec::warp_specialized),
  // FA3's tiles: 192 query rows on three consumer warpgroups at d64, 128 on two above; key
  // tiles as wide as the registers of S, P and O allow (docs/perf-notes.md, "warp-specialised").
  // d64 causal up to the 1k bucket: 128 query rows on two consumers (`flashgen tune` on the
  // H200: +4 % at N = 512, +6 % at 1k; short causal rows leave 192-row tiles idle). At most
  // 512 rows the all-threads 64x64 wgmma kernel (one warpgroup, more CTAs on the short rows)
  // beats both: 191.7 against 185.4 TFLOP/s at N = 512, equal at 1k (flashgen bench, H200,
  // 2026-12-03; the seqlen buckets join 512 and 1k, so this rule reads the lengths).
  const bool masked = p.causal || p.window;
  const bool short_causal = p.causal && !p.window && seqlen_bucket(p.seqlen_q, p.seqlen_k) <= 1024;
  const long long longest = std::max(p.seqlen_q, p.seqlen_k);  // 0: not known yet (MLIR's dynamic dims)
  const bool very_short_causal = p.causal && !p.window && longest > 0 && longest <= 512;
  // d64/d128/d256 unmasked try the persistent form first (one CTA per SM looping over the tiles;
  // the next tile's loads hide under this one's last products and epilogue). KernelSpec::problems()
  // refuses it where O's staging fits neither apart nor over the V ring. Under a mask the tiles
  // stay one per CTA: the persistent form's longest-first snake (scheduler/persistent.cuh) is
  // built and is the tuner's other-scheduling candidate (`flashgen tune --times` times both),
  // but lost to this one where measured (H100, 2026-12-07: causal forward d64 -3 %, d128 -7 % at
  // 4k, -2..+1 % at 16k; docs/perf-notes.md, "Sessions 21-22"). Unmasked, same
  // process as FA4 on the H200 (2026-12-03): forward +9 % at N = 1k (d128 499 -> 546, d64 403 ->
  // 444 TFLOP/s), +0-2 % at 4k/16k; `flashgen tune` kept it over the single-tile form at every
  // d64/d128 x 1k/4k/16k key, and at d256 by 0.4-4 % (`flashgen tune --times`, 2026-12-04).
  // d96..d128 unmasked from the 4k bucket: FA3's 128 x 176 (persistent, O staged over the V
  // ring). H200, 2026-12-04, same series against persistent 128 x 128 with O apart: d128 forward
  // +6-9 % at 4k, +4-6 % at 16k, but -4-6 % at 1k (six 176-key tiles cover 1,056 keys).
  const bool wide_keys = !p.causal && !p.window && seqlen_bucket(p.seqlen_q, p.seqlen_k) >= 4096;
  const auto persistent_first = [&](Tiles t) {
    Tiles persistent = t;
    persistent.persistent = !masked;
    return first_valid(s, {persistent, t});
  };
  if (arch == Arch::sm_90a && p.head_dim % 8 == 0) {
    if (d <= 64 && very_short_causal) return first_valid(s, {{64, 64, 4, 2}});
    if (d <= 64) return persistent_first(short_causal ? Tiles{128, 128, 12, 2} : Tiles{192, 128, 16, 2});
    if (d <= 128) return persistent_first(wide_keys ? Tiles{128, 176, 12, 2} : Tiles{128, 128, 12, 2});
    if (d <= 192) return first_valid(s, {{128, 112, 12, 2}});
    return persistent_first({128, 80, 12, 2});
  }
  // sm_90a, other head dims: wgmma (KernelSpec::uses_wgmma). Tiles from `flashgen tune` on the H200:
  // - d64 128x64 (two warpgroups, two CTAs per SM) and, under a window or a causal mask below
  //   the 4k sequence bucket, 64x64 (one warpgroup, more CTAs on the short rows);
  // - d96 (stored 128 wide) 128x128;
  // - d128 128x128, causal below the 4k bucket 64x64 (+7 % at N = 1024);
  // - d160..d256 two warpgroups; with a mask or softcap 32-key tiles (at 64 keys the d256
  //   wgmma tile spills 32 bytes).
  const bool causal_only = p.causal && !p.window;
  const bool long_causal = causal_only && seqlen_bucket(p.seqlen_q, p.seqlen_k) >= 4096;
  if (arch == Arch::sm_90a && d == 64)
    return first_valid(s, {masked && !long_causal ? Tiles{64, 64, 4, 2} : Tiles{128, 64, 8, 2}});
  if (arch == Arch::sm_90a && d == 128 && causal_only && !long_causal) return first_valid(s, {{64, 64, 4, 2}});
  if (arch == Arch::sm_90a && (d == 96 || d == 128)) return first_valid(s, {{128, 128, 8, 2}, {128, 64, 8, 2}});
  if (arch == Arch::sm_90a && d >= 160 && d % 32 == 0)
    return first_valid(s, {{128, masked || p.softcap ? 32 : 64, 8, 2}});
  // Up to d64, 32 query rows per warp fit (248 registers): each K/V fragment feeds two mma.
  if (d <= 64) return first_valid(s, {{128, 64, 4, 2}, {128, 128, 8, 2}, {64, 64, 4, 2}});
  if (d <= 96) return first_valid(s, {{128, 128, 8, 2}, {128, 64, 8, 2}, {64, 64, 4, 2}});
  if (d <= 160) return first_valid(s, {{128, 64, 8, 2}, {128, 32, 8, 2}, {64, 32, 4, 2}, {64, 32, 4, 1}});
  if (d <= 192) return first_valid(s, {{128, 32, 8, 2}, {64, 32, 4, 2}, {64, 32, 4, 1}});
  return first_valid(s, {{128, 16, 8, 2}, {64, 16, 4, 2}, {64, 16, 4, 1}});
}

KernelSpec rowwise_spec(const ProblemKey& p, Pass pass, Arch arch) {
  return first_valid(base_spec(p, pass, arch), {{64, 64, 4, 1}});
}

// Warps split the keys in 16-row slices and, beyond that, the head dim; a config
// whose split does not divide the padded head dim is skipped for the next one.
KernelSpec dkdv_spec(const ProblemKey& p, Arch arch) {
  const KernelSpec s = base_spec(p, Pass::bwd_dkdv, arch);
  const int d = s.padded_head_dim();
  // sm_90a, d 64..128 in 16-byte rows: the warp-specialised dK/dV kernel (64x128 on 12 warps,
  // KernelSpec::warp_specialized; docs/perf-notes.md, "warp-specialised dK/dV"); with softcap
  // on 64-query tiles only (KernelSpec::problems() refuses d64's 128-query tiles there, whose
  // registers the slope spills, and first_valid moves on to 64 x 128): on the H100 4.0x the
  // mma.sync kernel at d128 (session 25) and 1.42x the 8-warp wgmma kernel at d64 (6.1 against
  // 8.8 ms at 4k, 24.0 against 34.0 at 16k; docs/perf-notes.md, "Session 26").
  // d64: FA3's 128-query tiles, half the work items per K/V tile, so half the per-item
  // barriers, dS^T stores and dQ reductions (`flashgen tune` on the H200: +8-12 % unmasked,
  // causal +7-10 % at N = 4k/16k; docs/perf-notes.md, "128-query tiles").
  // (d128's 80-query tiles, FA3's and FA4's unmasked choice, ran 0.4-0.9 % slower at N = 4k
  // and within the noise at 16k on the H100: a tuning candidate, not the default;
  // docs/perf-notes.md, "80 x 128".)
  if (arch == Arch::sm_90a && d >= 64 && d <= 128 && p.head_dim % 8 == 0)
    return first_valid(s, {d == 64 ? Tiles{128, 128, 12, 2} : Tiles{64, 128, 12, 2}, {64, 128, 12, 2},
                           {64, 128, 8, 2}, {64, 64, 8, 2}});
  // 64x128 on 8 warps is wgmma on sm_90a (two warpgroups, KernelSpec::uses_wgmma) at d64, d96
  // and d128; at d128 the softcap slope spills 96 bytes there, so softcap keeps mma.sync.
  if (arch == Arch::sm_90a && (d == 96 || d == 128) && !p.softcap) return first_valid(s, {{64, 128, 8, 2}});
  // d256: both warpgroups on the same 64 keys, one head-dim half each, sharing S^T and dP^T
  // through shared memory; warp-specialised (12 warps: the TMA producer's warpgroup beside
  // them; +50 % on the all-threads kernel, docs/perf-notes.md, "d256 backward,
  // warp-specialised"), else all threads (a head dim that is no multiple of 8 spilled with
  // the element-wise loads: those keep mma.sync).
  if (arch == Arch::sm_90a && d == 256 && !p.softcap && p.head_dim % 8 == 0)
    return first_valid(s, {{64, 64, 12, 2}, {64, 64, 8, 2}, {64, 64, 8, 1}});
  // d64 on sm_90a (head dims of no 16-byte rows): 128-query tiles halve the per-tile costs
  // (barrier, dS^T store, dQ atomics' waits); the softcap slope makes them spill (196 bytes), so
  // softcap keeps 64 queries.
  if (arch == Arch::sm_90a && d == 64 && !p.softcap) return first_valid(s, {{128, 128, 8, 2}, {64, 128, 8, 2}});
  // With the softcap slope and no dQ product, ptxas fits 64x128 on 8 warps (mma.sync) into
  // 255 registers only with 8 bytes of spills on sm_80/86/89; 64x64 keeps 40 to spare.
  if (arch != Arch::sm_90a && d <= 64 && p.softcap && p.deterministic)
    return first_valid(s, {{64, 64, 8, 2}, {64, 64, 4, 1}});
  if (d <= 64) return first_valid(s, {{64, 128, 8, 2}, {64, 64, 8, 2}, {64, 64, 4, 1}});
  if (d <= 96) return first_valid(s, {{64, 64, 8, 2}, {64, 64, 8, 1}, {32, 64, 4, 1}});
  // The softcap derivative keeps 16 more registers live per thread, and ptxas schedules the
  // deterministic (no dQ) variant differently: both spill at 32x128 on some arch, not at 32x64.
  if (d <= 128 && (p.softcap || p.deterministic))
    return first_valid(s, {{32, 64, 8, 2}, {64, 64, 8, 2}, {32, 64, 8, 1}, {32, 64, 4, 1}});
  // Plain sm_90 (mma.sync on Hopper, a compile target the runtime never picks: it runs sm_90a)
  // spills 16 bytes at 32x128 under a mask; 64x64 keeps 9 registers to spare. Packed sequences
  // on sm_80 spill 4-8 bytes there too (their offsets take registers the dense kernel does not).
  if ((arch == Arch::sm_90 || (arch == Arch::sm_80 && p.varlen)) && d > 96 && d <= 128 && (p.causal || p.window))
    return first_valid(s, {{64, 64, 8, 2}, {32, 64, 8, 1}, {32, 64, 4, 1}});
  if (d <= 128) return first_valid(s, {{32, 128, 8, 2}, {64, 64, 8, 2}, {32, 64, 8, 1}, {32, 64, 4, 1}});
  if (d <= 160) return first_valid(s, {{32, 64, 8, 2}, {32, 64, 8, 1}, {32, 32, 4, 1}});
  if (d <= 192) return first_valid(s, {{32, 64, 8, 1}, {32, 32, 8, 1}, {32, 32, 4, 1}});
  return first_valid(s, {{32, 32, 8, 1}, {32, 32, 4, 1}, {16, 16, 1, 1}});
}

KernelSpec dq_spec(const ProblemKey& p, Arch arch) {
  const KernelSpec s = base_spec(p, Pass::bwd_dq, arch);
  const int d = s.padded_head_dim();
  if (d <= 192) return first_valid(s, {{64, 32, 4, 2}, {64, 32, 4, 1}, {64, 16, 4, 1}});
  return first_valid(s, {{64, 16, 4, 2}, {64, 16, 4, 1}, {32, 16, 2, 1}});
}

// Decode: tiles of 16 or 32 GQA-packed query rows (seqlen_q x the heads of one KV head), 4
// warps each folding a quarter of every K/V tile in, and a ring of three K/V tiles (~100 KB at
// d128: two CTAs per H200 SM keep ~200 KB of K/V reads in flight). More rows (speculative
// decoding: 16 positions x 4..8 heads) take 64-row tiles on 8 warps, row groups x key slices,
// so that K/V is still read once per KV head. The split count is a launch parameter
// (runtime/launch_plan.cpp, split_count).
KernelSpec splitkv_spec(const ProblemKey& p, Arch arch) {
  const KernelSpec s = base_spec(p, Pass::fwd_splitkv, arch);
  const int d = s.padded_head_dim();
  const long long rows = p.seqlen_q * std::max(1LL, p.heads_q / std::max(1LL, p.heads_kv));
  // Above d128 a warp's O (16 rows x the head dim, fp32) takes half the registers: 16-row tiles
  // of 4 warps reach ptxas's 255 and spill in some variants (fp16, packed queries, causal with
  // softcap: 4-52 bytes at d256), 32-row tiles of two row groups stay at 246-248 in all 48
  // (dtype x cache x options x arch; `flashgen dump --emit resources`), even where rows <= 16.
  if (d > 128) return first_valid(s, {{32, 64, 8, 2}, {32, 64, 8, 1}, {16, 64, 4, 1}});
  if (rows <= 16) {
    // Rows of 16-byte multiples load K/V by cp.async; other head dims stage them in registers,
    // which 128-key tiles cannot afford (d59: 254 registers, 24 bytes spilled).
    if (d <= 64 && p.head_dim % 8 == 0) return first_valid(s, {{16, 128, 4, 3}, {16, 128, 4, 2}, {16, 64, 4, 2}});
    return first_valid(s, {{16, 64, 4, 3}, {16, 64, 4, 2}, {16, 64, 4, 1}});
  }
  if (rows <= 32) {
    if (d <= 64) return first_valid(s, {{32, 128, 4, 3}, {32, 128, 4, 2}, {32, 64, 4, 2}});
    return first_valid(s, {{32, 64, 4, 3}, {32, 64, 4, 2}, {32, 64, 4, 1}});
  }
  if (d <= 64) return first_valid(s, {{64, 64, 8, 3}, {64, 64, 8, 2}, {32, 64, 4, 2}});
  // d72..d128: 128-key tiles on 4 row groups x 2 key slices (KernelSpec::decode_key_slices).
  // 16 speculative positions x 4 heads (B 8, 16k keys) on an H100, 3 rounds: paged 16 206 us
  // against 222 for 64-key tiles, paged 256 202 against 218-223, dense 199-200 against 200-201
  // (half the tiles: half the ring barriers, page lookups and per-tile softmax work; 206
  // registers, no spill). 64-key tiles in turn had beaten 32-key ones (195 against 225 us on
  // the H200, 2026-12-03). Deeper rings (s5 at 64 keys: 209 us), 16 warps (213), two CTAs of 4
  // warps per SM (209) measured slower: docs/perf-notes.md, "Session 26". sm_86/89's 99 KB take
  // the 32-key tiles. Head dims of no 16-byte rows stage K/V in registers: 128-key tiles spill
  // there (d111: 255 registers, 4 bytes), so they keep 64 keys.
  if (p.head_dim % 8 == 0)
    return first_valid(s, {{64, 128, 8, 2}, {64, 64, 8, 3}, {64, 32, 8, 3}, {64, 32, 8, 2}, {32, 64, 4, 1}});
  return first_valid(s, {{64, 64, 8, 3}, {64, 32, 8, 3}, {64, 32, 8, 2}, {32, 64, 4, 1}});
}

}  // namespace

// seqlen_q 0 is a length not known yet (MLIR's dynamic dims): the prefill kernel.
bool decode_shaped(const ProblemKey& problem) {
  const bool kv_cache = problem.paged || problem.seqused_k;
  // Packed sequences run on the prefill kernels, packed queries over a KV cache on split-KV.
  if (problem.varlen) return kv_cache;
  return (problem.seqlen_q >= 1 && problem.seqlen_q <= kDecodeMaxSeqlenQ) || kv_cache;
}

bool has_backward(const ProblemKey& problem) { return !problem.paged && !problem.seqused_k; }

std::vector<KernelSpec> select_forward_kernels(const ProblemKey& problem, Arch arch) {
  if (decode_shaped(problem))
    // The combine merges one row per CTA (it is bound by load latency: FwdCombineKernel).
    return {splitkv_spec(problem, arch), first_valid(base_spec(problem, Pass::fwd_combine, arch), {{1, 64, 4, 1}})};
  return {forward_spec(problem, arch)};
}

KernelSpec select_kv_append_kernel(int head_dim, DType dtype, bool paged, bool packed, Arch arch) {
  KernelSpec s;
  s.pass = Pass::kv_append;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.paged = paged;
  s.varlen = packed;
  s.arch = arch;
  return first_valid(s, {{16, 16, 4, 1}});
}

std::vector<KernelSpec> select_backward_kernels(const ProblemKey& problem, Arch arch) {
  std::vector<KernelSpec> out = {rowwise_spec(problem, Pass::bwd_preprocess, arch), dkdv_spec(problem, arch)};
  if (problem.deterministic)
    out.push_back(dq_spec(problem, arch));
  else
    out.push_back(rowwise_spec(problem, Pass::bwd_dq_convert, arch));
  return out;
}

}  // namespace flashgen
