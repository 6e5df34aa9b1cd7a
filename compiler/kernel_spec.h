// KernelSpec: everything that determines one generated kernel's source.
// Values that do not change the code (sequence lengths, window sizes, the
// softcap value, strides) are launch parameters, not spec fields.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashgen/types.hpp"

namespace flashgen {

enum class Pass : int {
  fwd = 0,
  bwd_preprocess = 1,  // D = rowsum(dO * O); zero the dQ accumulator
  bwd_dkdv = 2,        // one K/V tile per CTA, loop over Q tiles; dQ via atomics unless deterministic
  bwd_dq = 3,          // one Q tile per CTA, loop over K/V tiles; dQ without atomics (deterministic)
  bwd_dq_convert = 4,  // fp32 dQ accumulator -> dq in the input dtype, times the scale
  fwd_splitkv = 5,     // decode forward: a GQA-packed query tile against one split of the keys per CTA
  fwd_combine = 6,     // decode forward over several splits: the parts merged by lse into o and lse
  kv_append = 7,       // new K/V rows into a KV cache at each sequence's length, keys (and q) rotated
};
// The backward's passes: the only ones whose code reads `deterministic` (the forward has no
// atomics), so the specs of the others leave it unset and a deterministic call shares their kernels.
constexpr bool is_backward(Pass p) {
  return p == Pass::bwd_preprocess || p == Pass::bwd_dkdv || p == Pass::bwd_dq || p == Pass::bwd_dq_convert;
}
constexpr Pass kAllPasses[] = {Pass::fwd,         Pass::bwd_preprocess, Pass::bwd_dkdv,    Pass::bwd_dq,
                               Pass::bwd_dq_convert, Pass::fwd_splitkv, Pass::fwd_combine, Pass::kv_append};

enum class Arch : int { sm_80 = 80, sm_86 = 86, sm_89 = 89, sm_90 = 90, sm_90a = 900 };
constexpr Arch kAllArchs[] = {Arch::sm_80, Arch::sm_86, Arch::sm_89, Arch::sm_90, Arch::sm_90a};

const char* to_string(Pass p);
const char* to_string(Arch a);
std::optional<Pass> parse_pass(std::string_view s);
std::optional<Arch> parse_arch(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);

// Shared memory a CTA may use on an arch (opt-in maximum), bytes.
int max_shared_memory(Arch a);
// Compute capability as major*10+minor (sm_90a -> 90).
int compute_capability(Arch a);

// The code-changing options of a problem, shared by KernelSpec, ProblemKey (selection)
// and TuningKey (autotuning). Fields and their meaning: compiler/spec_fields.h.
struct ProblemOptions {
  int head_dim = 128;
  DType dtype = DType::bf16;
  bool causal = false;
  bool window = false;   // the sizes are launch parameters
  bool softcap = false;  // the cap is a launch parameter
  bool deterministic = false;
  bool paged = false;  // K/V pages through a block table (the split-KV forward only)
  bool varlen = false;  // packed variable-length sequences (cu_seqlens; the split-KV kernels: packed queries
                        // over a KV cache)

  bool operator==(const ProblemOptions&) const = default;
};

// The width of a head dim's tiles and fp32 workspace rows (dQ accumulator, split-KV
// partials): head_dim rounded up to the tensor-core k-step (16), at least 32. Like
// FlashAttention-2, head dims 1..31 run on 32-column tiles whose columns >= head_dim are
// zero-filled on load and never stored.
inline int padded_head_dim(std::int64_t head_dim) {
  return static_cast<int>(std::max<std::int64_t>(32, (head_dim + 15) / 16 * 16));
}

// One kernel: the problem's options plus the pass, tiles and target (spec_fields.h).
// fp32 O and S values a split-KV decode thread may hold: ptxas fits 144 (d128, 32 rows x 16
// keys a warp) in 245 registers without spilling, 160 (32 rows x 32 keys) spill at 255. So a
// 64 x 128 tile of 8 warps splits into 4 row groups x 2 key slices of 64 keys, not 2 x 4.
inline constexpr int kDecodeAccumulatorBudget = 144;

struct KernelSpec : ProblemOptions {
  Pass pass = Pass::fwd;
  int block_m = 128;
  int block_n = 64;
  int warps = 4;
  int stages = 2;
  // The warp-specialised forward as one CTA per SM looping over the work tiles
  // (templates/scheduler/persistent.cuh): the next tile's Q and K/V load under this one's
  // last products and epilogue, which stage O in a buffer of their own.
  bool persistent = false;
  Arch arch = Arch::sm_80;

  // The width kernels are compiled for: flashgen::padded_head_dim(head_dim).
  int padded_head_dim() const { return flashgen::padded_head_dim(head_dim); }
  int threads() const { return warps * 32; }
  // The passes with matrix products (fwd, bwd_dkdv, bwd_dq, fwd_splitkv); the others are row-wise.
  bool uses_tensor_cores() const {
    return pass == Pass::fwd || pass == Pass::bwd_dkdv || pass == Pass::bwd_dq || pass == Pass::fwd_splitkv;
  }
  // Hopper warpgroup products (sm_90a) where the tile has the warpgroup shape, mma.sync
  // otherwise: forward with block_m = 16 * warps (64 rows per 4 warps), block_n in
  // {32, 64, 128, 256} and padded head dim a multiple of 32 from 64 up (stored in 64-column
  // blocks); dK/dV with 8 warps: 64 queries x 128 keys at padded head dim 64, 96 or 128,
  // 128 x 128 at 64, 64 x 64 at 256. `flashgen dump --emit source` shows kWgmma.
  bool uses_wgmma() const;
  // The warp-specialised kernels (sm_90a): one producer warpgroup (TMA loads; in dK/dV also
  // the dQ writer warp) plus consumer warpgroups of 64 rows on wgmma, so warps = 4 * (rows /
  // 64 + 1): the forward over block_m = 128 or 192 query rows (12 or 16 warps,
  // templates/fwd/fwd_kernel_sm90.cuh), dK/dV over block_n = 128 keys with 64-query tiles
  // (12 warps, templates/bwd/bwd_dkdv_kernel_sm90.cuh). Both need rows of 16 bytes
  // (head_dim % 8 == 0) for the TMA descriptors. The shape alone says it: no other kernel
  // has that many warps for its rows.
  bool warp_specialized() const;
  // Consumer warpgroups of a warp-specialised kernel (0 for every other kernel).
  int consumer_warpgroups() const {
    return !warp_specialized() ? 0 : pass == Pass::fwd ? block_m / 64 : block_n / 64;
  }
  // The split-KV decode's warps (templates/fwd/splitkv_mainloop.cuh): key slices of each K/V
  // tile times row groups of the packed query tile; a warp owns block_m / row groups rows and
  // one key slice. The most slices (at most min(warps, block_n / 16)) whose warps hold whole
  // 16-row slices and at most kDecodeAccumulatorBudget O and S values per thread.
  int decode_key_slices() const;
  int decode_warp_rows() const { return block_m / std::max(1, warps / std::max(1, decode_key_slices())); }
  // CTAs per SM the kernel is compiled for (the second argument of __launch_bounds__): 2 for
  // the sm_90a forward on 8 warps whose O and S tiles fit 128 registers per thread and whose
  // shared memory fits twice (d64, d96 at 64 keys), 1 otherwise.
  int min_blocks_per_sm() const;
  // fp32 accumulator values a thread keeps live (output/gradient tiles plus the S/dP tiles):
  // the main term of the kernel's register pressure.
  int accumulators_per_thread() const;

  // Empty when the spec is legal; otherwise one message per problem, each naming the field.
  std::vector<std::string> problems() const;
  // Throws Error(invalid_argument) with every problem joined.
  void validate() const;

  // Readable and unique (every field's spec_fields.h spelling):
  // fwd_d128_bf16_m128n64_w4s2_causal_sm_90
  std::string uri() const;
  // Content hash of every field (hex, 128-bit XXH3).
  std::string hash() const;
  // Dynamic shared memory the kernel needs, bytes.
  int shared_memory_bytes() const;
  // The persistent warp-specialised forward stages O over its V ring instead of in a tile of
  // its own: where that tile does not fit the arch's shared memory (compiler/shared_memory.cpp).
  bool o_staged_over_v() const;

  bool operator==(const KernelSpec&) const = default;
};

}  // namespace flashgen
