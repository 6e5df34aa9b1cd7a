#include "compiler/kernel_spec.h"

#include "compiler/spec_fields.h"
#include "templates/params/attention_params.h"

#include <fmt/format.h>

#include <xxhash.h>

#include <utility>

namespace flashgen {

const char* to_string(Pass p) {
  switch (p) {
    case Pass::fwd: return "fwd";
    case Pass::bwd_preprocess: return "bwd_preprocess";
    case Pass::bwd_dkdv: return "bwd_dkdv";
    case Pass::bwd_dq: return "bwd_dq";
    case Pass::bwd_dq_convert: return "bwd_dq_convert";
    case Pass::fwd_splitkv: return "fwd_splitkv";
    case Pass::fwd_combine: return "fwd_combine";
    case Pass::kv_append: return "kv_append";
  }
  return "?";
}

const char* to_string(Arch a) {
  switch (a) {
    case Arch::sm_80: return "sm_80";
    case Arch::sm_86: return "sm_86";
    case Arch::sm_89: return "sm_89";
    case Arch::sm_90: return "sm_90";
    case Arch::sm_90a: return "sm_90a";
  }
  return "?";
}

std::optional<Pass> parse_pass(std::string_view s) {
  for (Pass p : kAllPasses)
    if (s == to_string(p)) return p;
  return std::nullopt;
}

std::optional<Arch> parse_arch(std::string_view s) {
  for (Arch a : kAllArchs)
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp16" || s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  return std::nullopt;
}

int max_shared_memory(Arch a) {
  switch (a) {
    case Arch::sm_80: return 163 * 1024;
    case Arch::sm_86:
    case Arch::sm_89: return 99 * 1024;
    case Arch::sm_90:
    case Arch::sm_90a: return 227 * 1024;
  }
  return 48 * 1024;
}

int compute_capability(Arch a) { return a == Arch::sm_90a ? 90 : static_cast<int>(a); }

static bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

template <typename... A>
static void add(std::vector<std::string>& out, fmt::format_string<A...> f, A&&... a) {
  out.push_back(fmt::format(f, std::forward<A>(a)...));
}

std::vector<std::string> KernelSpec::problems() const {
  std::vector<std::string> out;

  if (head_dim < 1 || head_dim > 256)
    add(out, "head_dim: got {}, expected a value in 1..256", head_dim);
  if (dtype != DType::f16 && dtype != DType::bf16)
    add(out, "dtype: got {}, expected fp16 or bf16 (fp32 runs on the CPU backend only)", to_string(dtype));
  if (warps < 1 || warps > 16 || (!is_pow2(warps) && !warp_specialized()))
    add(out, "warps: got {}, expected a power of two in 1..16 (or 4 * (block_m / 64 + 1) for the sm_90a "
        "warp-specialised forward)", warps);
  if (stages < 1 || stages > 4) add(out, "stages: got {}, expected 1..4", stages);
  if (pass == Pass::fwd_combine) {  // merges its rows one at a time: any count
    if (block_m < 1 || block_m > 256) add(out, "block_m: got {}, expected 1..256 rows per CTA", block_m);
  } else if (block_m < 16 || block_m > 256 || block_m % 16 != 0) {
    add(out, "block_m: got {}, expected a multiple of 16 in 16..256", block_m);
  }
  if (block_n < 16 || block_n > 256 || block_n % 16 != 0)
    add(out, "block_n: got {}, expected a multiple of 16 in 16..256", block_n);
  if (!out.empty()) return out;  // the checks below assume sane values

  if (warp_specialized() && pass == Pass::bwd_dkdv) {
    const int d = padded_head_dim();
    if (d == 256) {
      if (block_m != 64)
        add(out, "block_m: got {} for the warp-specialised dK/dV kernel at padded head_dim 256, expected 64 (two "
            "stages of 64-query Q and dO tiles beside K, V and the shared scores fill the shared memory)", block_m);
    } else if (!((block_m == 64 || (block_m == 128 && d == 64) || (block_m == 80 && d == 128)) && block_n == 128)) {
      add(out, "block_m/block_n: got {}x{} for the warp-specialised dK/dV kernel at padded head_dim {}, expected "
          "64x128 (two consumer warpgroups of 64 keys, 64-query tiles), at head_dim 64 also 128x128 (S^T and dP^T "
          "of 128 queries beside dK and dV), at padded head_dim 128 also 80x128 (dQ by head-dim columns), at "
          "padded head_dim 256 64x64", block_m, block_n, d);
    }
    if (block_m == 80 && varlen && (causal || window || deterministic))
      add(out, "block_m: got 80 for the warp-specialised dK/dV kernel over packed sequences with a {}, expected "
          "64 (there the 80-query tile spills 12-44 bytes)", causal ? "causal mask" : window ? "window" :
          "deterministic dQ");
    if (d < 64 || (d > 128 && d != 256))
      add(out, "head_dim: got {} for the warp-specialised dK/dV kernel, expected 49..128 (dK and dV of a "
          "warpgroup's 64 keys in registers; below 64 the producer spills) or 249..256 (a head-dim half of 64 "
          "keys per warpgroup)", head_dim);
    if (head_dim % 8 != 0)
      add(out, "head_dim: got {} for the warp-specialised dK/dV kernel, expected a multiple of 8 (TMA rows of 16 "
          "bytes)", head_dim);
    // The slope (dtanh, one register per score) beside S^T, dP^T, dK and dV: 64-query tiles keep it
    // spill-free at d64..d128 (flashgen dump, 2026-12-07); 80- and 128-query tiles spilled 170-450 bytes,
    // and d256's shared-scores kernel has no registers for it.
    if (softcap && (d == 256 || block_m != 64))
      add(out, "softcap: set for the warp-specialised dK/dV kernel {}, expected 64-query tiles at padded head_dim "
          "64..128 (the softcap slope's registers spill on larger tiles and do not fit at 256)",
          d == 256 ? std::string("at padded head_dim 256") : fmt::format("on {}-query tiles", block_m));
  } else if (warp_specialized()) {
    if (block_m != 128 && block_m != 192)
      add(out, "block_m: got {} for the warp-specialised forward, expected 128 or 192 (two or three consumer "
          "warpgroups of 64 rows)", block_m);
    if (head_dim % 8 != 0)
      add(out, "head_dim: got {} for the warp-specialised forward, expected a multiple of 8 (TMA rows of 16 bytes)",
          head_dim);
    if (persistent && (causal || window) && padded_head_dim() > 128)
      add(out, "persistent: set with a {} at padded head_dim {}, expected unmasked tiles above 128 (the masked "
          "walk's state beside O's 128 registers a thread spills 20-84 bytes)", causal ? "causal mask" : "window",
          padded_head_dim());
    if (persistent && softcap && (block_m == 192 || padded_head_dim() > 128))
      add(out, "persistent: set with softcap at {}x{} and padded head_dim {}, expected one tile per CTA there (the "
          "walk's state beside the softcap slope spills 48-268 bytes in three 128-register warpgroups or beside "
          "O at head_dim 256)", block_m, block_n, padded_head_dim());
    if (o_staged_over_v() && block_m > stages * block_n)
      add(out, "persistent: set with block_m {} > stages x block_n = {} where the O tile does not fit beside the K/V "
          "rings, expected it to fit over the V ring", block_m, stages * block_n);
  } else if (pass == Pass::fwd || pass == Pass::bwd_dq) {
    // The tensor-core passes split their tile across warps in 16-row slices.
    if (block_m % (16 * warps) != 0)
      add(out, "block_m: got {} with {} warps, expected a multiple of 16*warps = {} (each warp owns 16-row slices)",
          block_m, warps, 16 * warps);
  }
  if (persistent && !(pass == Pass::fwd && warp_specialized()))
    add(out, "persistent: set for the {} pass with {} warps, expected the sm_90a warp-specialised forward only",
        to_string(pass), warps);
  if (paged && pass != Pass::fwd_splitkv && pass != Pass::kv_append)
    add(out, "paged: set for the {} pass, expected it only on fwd_splitkv and kv_append (the paged-cache kernels)",
        to_string(pass));
  if (pass == Pass::kv_append)  // one kernel per (head_dim, dtype, paged): the rest does not change its code
    for (const auto& [set, name] : {std::pair{causal, "causal"}, {window, "window"}, {softcap, "softcap"},
                                    {deterministic, "deterministic"}})
      if (set) add(out, "{}: set for the kv_append pass, expected it unset (the append depends on head_dim, dtype, "
                   "paged and varlen only)", name);
  if (pass == Pass::fwd_combine && threads() > kFlashMaxSplits)
    add(out, "warps: got {} for the split-KV combine, expected at most {} threads (one part's lse each)", warps,
        static_cast<int>(kFlashMaxSplits));
  if (pass == Pass::fwd_splitkv) {
    // Warps = key slices x row groups; each holds its rows' O and its own ledger.
    const int slices = decode_key_slices(), groups = warps / slices;
    if (block_m != 16 && block_m != 32 && block_m != 64)
      add(out, "block_m: got {} for the split-KV decode, expected 16, 32 or 64 packed query rows", block_m);
    else if (warps % slices != 0 || block_n % (16 * slices) != 0 || block_m % groups != 0 ||
             decode_warp_rows() % 16 != 0)
      add(out, "warps: got {} for the split-KV decode with block_m {} and block_n {}, expected {} key slices of "
          "16-key steps times row groups of 16-row slices", warps, block_m, block_n, slices);
    else if (decode_warp_rows() * padded_head_dim() / 32 > 128)
      add(out, "block_m: got {} for the split-KV decode at padded head_dim {} with {} warps, expected at most 128 O "
          "accumulators per thread ({} rows per warp)", block_m, padded_head_dim(), warps, decode_warp_rows());
  }
  if (pass == Pass::bwd_dkdv && !warp_specialized()) {
    // Warps split the keys in 16-row slices; more warps than slices split the head dim
    // of the dK/dV accumulators (in 8-column steps). The dQ product (atomic path)
    // splits the query rows the same way.
    const int d = padded_head_dim();
    auto check_split = [&](const char* field, int rows, const char* what) {
      const int slices = rows / 16;
      if (warps <= slices) {
        if (slices % warps != 0)
          add(out, "{}: got {} with {} warps, expected a multiple of 16*warps = {} ({})", field, rows, warps,
              16 * warps, what);
      } else if (warps % slices != 0 || (d / 8) % (warps / slices) != 0) {
        add(out,
            "warps: got {} for {} = {} and padded head_dim {}, expected warps / ({}/16) to divide head_dim/8 ({})",
            warps, field, rows, d, field, what);
      }
    };
    check_split("block_n", block_n, "dK/dV rows per warp");
    if (!deterministic) check_split("block_m", block_m, "dQ rows per warp");
  }
  if (pass == Pass::bwd_preprocess || pass == Pass::bwd_dq_convert ||
      (pass == Pass::bwd_dkdv && !warp_specialized())) {
    // These index the fp32 dQ accumulator without row bounds: its rows are seqlen_q
    // rounded up to 128 (the runtime's seqlen_q_rounded). (The warp-specialised dK/dV kernel
    // reads D only in its rows and adds dQ through a map that clips the rest.)
    if (128 % block_m != 0)
      add(out, "block_m: got {}, expected a divisor of 128 (the dQ accumulator's row rounding)", block_m);
  }
  const int smem = shared_memory_bytes();
  if (smem > max_shared_memory(arch))
    add(out, "block_m/block_n/stages: the tile needs {} bytes of shared memory, more than {} allows ({} bytes)", smem,
        to_string(arch), max_shared_memory(arch));
  return out;
}

bool KernelSpec::warp_specialized() const {
  if (arch != Arch::sm_90a) return false;
  // dK/dV at d256: two consumer warpgroups on the same 64 keys (a head-dim half each) and the producer's.
  if (pass == Pass::bwd_dkdv && block_n == 64 && padded_head_dim() == 256) return warps == 12;
  const int rows = pass == Pass::fwd ? block_m : pass == Pass::bwd_dkdv ? block_n : 0;
  // Two or more consumers: one consumer plus a producer (8 warps over 64 rows) is the shape
  // of the all-threads kernels' tiles.
  return rows >= 128 && rows % 64 == 0 && warps == 4 * (rows / 64 + 1);
}

bool KernelSpec::uses_wgmma() const {
  if (arch != Arch::sm_90a) return false;
  if (warp_specialized()) return true;
  auto wgmma_width = [](int n) { return n == 64 || n == 128 || n == 256; };
  const int d = padded_head_dim();
  // Forward: any head dim in 32-column parts from 64 up (wgmma_rs_mn_major splits P.V).
  if (pass == Pass::fwd)
    return warps % 4 == 0 && block_m == 16 * warps && (block_n == 32 || wgmma_width(block_n)) && d >= 64 &&
           d % 32 == 0;
  // dK/dV: two warpgroups of 64 keys each over 64-query tiles (d64/96/128: dK and dV of up to
  // 128 columns fill the registers) or, at d64, 128-query tiles (S^T and dP^T of 128 queries
  // fit beside dK and dV); at d256 the same 64 keys, one head-dim half each.
  if (pass == Pass::bwd_dkdv)
    return warps == 8 && ((block_m == 64 && block_n == 128 && (d == 64 || d == 96 || d == 128)) ||
                          (block_m == 128 && block_n == 128 && d == 64) ||
                          (block_m == 64 && block_n == 64 && d == 256));
  return false;
}

// Two CTAs per SM let one CTA's loads and epilogue overlap the other's products, which at
// short or causal rows (few K/V tiles per CTA) is most of the gap to the peak: d96 forward
// +11-14 % on the H200 (docs/perf-notes.md, "two CTAs per SM"). ptxas then holds the kernel
// to 128 registers: O and S must stay within 80 fp32 values per thread (softcap's slope and
// the element-wise loads of a head dim that is no multiple of 8 would not fit: 56 and 140
// bytes of spill at d96).
int KernelSpec::min_blocks_per_sm() const {
  if (pass != Pass::fwd || !uses_wgmma() || warps != 8 || softcap || head_dim % 8 != 0) return 1;
  return accumulators_per_thread() <= 80 && 2 * shared_memory_bytes() <= max_shared_memory(arch) ? 2 : 1;
}

int KernelSpec::decode_key_slices() const {
  const int most = std::max(1, std::min(warps, block_n / 16));
  for (int slices = most; slices >= 1; --slices) {
    const int groups = warps / slices;
    if (warps % slices != 0 || block_m % groups != 0 || (block_m / groups) % 16 != 0) continue;
    const int rows = block_m / groups;
    if ((rows * padded_head_dim() + rows * block_n / slices) / 32 <= kDecodeAccumulatorBudget) return slices;
  }
  return most;  // none fits: problems() names what is wrong
}

int KernelSpec::accumulators_per_thread() const {
  const int d = padded_head_dim(), m = block_m, n = block_n;
  const int consumer_threads = threads() - (warp_specialized() ? 128 : 0);
  switch (pass) {
    // Over the consumer warpgroups' threads where a producer warpgroup holds none.
    case Pass::fwd: return (m * d + m * n) / consumer_threads;              // O, S
    case Pass::bwd_dkdv: return (2 * n * d + 2 * m * n) / consumer_threads;  // dK, dV, S, dP
    case Pass::bwd_dq: return (m * d + 2 * m * n) / consumer_threads;  // dQ, S, dP
    case Pass::fwd_splitkv:  // each warp: O of its rows, S of its rows and keys
      return (decode_warp_rows() * d + decode_warp_rows() * n / decode_key_slices()) / 32;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
    case Pass::fwd_combine:
    case Pass::kv_append: return 0;
  }
  return 0;
}

void KernelSpec::validate() const {
  auto p = problems();
  if (p.empty()) return;
  std::string msg = fmt::format("invalid kernel spec {}: ", uri());
  for (size_t i = 0; i < p.size(); ++i) msg += (i ? "; " : "") + p[i];
  throw Error(Status::invalid_argument, msg);
}

std::string KernelSpec::uri() const {
  std::string s;
  for_each_spec_field([&](const auto& field) { s += uri_part(field, this->*field.member); });
  return s;
}

// The canonical text predates the field table; its keys and value spellings (enums by
// number) are kept so that hashes, and with them cache entries and tuning sets, stay valid.
std::string KernelSpec::hash() const {
  std::string canonical;
  for_each_spec_field([&](const auto& field) {
    const auto value = this->*field.member;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>)
      if (field.hashed_when_set && !value) return;
    if constexpr (std::is_enum_v<std::decay_t<decltype(value)>>)
      canonical += fmt::format("{}{}={}", canonical.empty() ? "" : ";", field.hash_key, static_cast<int>(value));
    else
      canonical += fmt::format("{}{}={}", canonical.empty() ? "" : ";", field.hash_key, value);
  });
  const XXH128_hash_t h = XXH3_128bits(canonical.data(), canonical.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace flashgen
