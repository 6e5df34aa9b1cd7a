#include "compile_check.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "compiler/kernel_pieces.h"
#include "compiler/kernel_selection.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen::test {

std::string compile_case_name(const CompileCase& c) {
  return fmt::format("d{}_{}{}{}{}_{}", c.head_dim, c.dtype == DType::bf16 ? "bf16" : "fp16", c.causal ? "_causal" : "",
                     c.window ? "_window" : "", c.softcap ? "_softcap" : "", to_string(c.arch));
}

// Four accepted exceptions. The first: the sm_90a wgmma dK/dV kernels at padded head dim 256
// keep dK, dV and the shared S^T/dP^T at 255 registers, and ptxas spills up to 8 bytes in some
// variants (4 bytes when deterministic; docs/perf-notes.md, "kernels from pieces").
// The second: the sm_90a forward compiled for two CTAs per SM is held to 128 registers, and
// at padded d96 ptxas spills up to 16 bytes (values around the K/V prefetch; the two CTAs
// per SM are worth far more: "two CTAs per SM").
// The third: the split-KV decode at head dims that are not a multiple of 8 stages K/V rows
// through registers (no 16-byte cp.async), and ptxas spills up to 72 bytes in every tile at
// d250 (8-20 at the least, 32x64 with one stage); the decode reads memory, and FA2 pads such
// head dims instead of running them (docs/perf-notes.md, "Spills of the split-KV decode").
// The fourth: the warp-specialised dK/dV kernel on 128-query tiles over packed sequences spills
// up to 12 bytes in its producer warp (24 registers: the SASS puts every spill beside the stage's
// lse and D loads, once per work item; the consumers keep 0), where the 64-query tiles are 12 %
// slower (docs/perf-notes.md, "128-query tiles").
int allowed_spill_bytes(const KernelSpec& s) {
  if (s.pass == Pass::bwd_dkdv && dkdv_mainloop(s) == DkdvMainloop::sm90_shared_scores) return 8;
  if (s.pass == Pass::bwd_dkdv && s.warp_specialized() && s.block_m == 128 && s.varlen) return 16;
  if (s.pass == Pass::fwd_splitkv && s.head_dim % 8 != 0) return 96;
  return s.min_blocks_per_sm() == 2 ? 16 : 0;
}

void expect_compiles_without_spills(const CompileCase& c) {
  ProblemKey key;
  key.head_dim = c.head_dim;
  key.dtype = c.dtype;
  key.causal = c.causal;
  key.window = c.window;
  key.softcap = c.softcap;
  std::vector<KernelSpec> specs = select_forward_kernels(key, c.arch);
  for (bool deterministic : {false, true}) {
    key.deterministic = deterministic;
    for (const KernelSpec& s : select_backward_kernels(key, c.arch))
      if (!deterministic || s.pass != Pass::bwd_preprocess) specs.push_back(s);  // the same preprocess modulo zeroing
  }
  // The dK/dV kernel over packed sequences (its offsets take registers the dense one does not).
  ProblemKey packed = key;
  packed.deterministic = false;
  packed.varlen = true;
  specs.push_back(select_backward_kernels(packed, c.arch)[1]);
  // The inference kernels of the same options: split-KV and its combine over a dense cache
  // (key counts) and a paged one, queries dense and packed, and the KV append.
  for (bool paged : {false, true})
    for (bool packed : {false, true}) {
      ProblemKey decode = key;
      decode.deterministic = false;
      decode.seqlen_q = 1;
      decode.heads_q = 8;
      decode.heads_kv = 2;
      decode.paged = paged;
      decode.seqused_k = !paged;
      decode.varlen = packed;
      for (const KernelSpec& s : select_forward_kernels(decode, c.arch))
        if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(s);
      specs.push_back(select_kv_append_kernel(c.head_dim, c.dtype, paged, packed, c.arch));
    }
  for (const KernelSpec& s : specs) {
    try {
      const CompiledKernel k = compile_kernel(s);
      EXPECT_FALSE(k.cubin.empty()) << s.uri();
      const int allowed = allowed_spill_bytes(s);
      EXPECT_LE(k.resources.spill_stores, allowed) << s.uri() << " spills (" << k.resources.registers << " registers)";
      EXPECT_LE(k.resources.spill_loads, allowed) << s.uri() << " spills (" << k.resources.registers << " registers)";
      EXPECT_GT(k.resources.registers, 0) << s.uri() << ": no ptxas report parsed";
    } catch (const Error& e) {
      ADD_FAILURE() << s.uri() << ": " << e.what();
    }
  }
}

}  // namespace flashgen::test
