#include "compile_check.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "compiler/kernel_pieces.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen::test {

std::string compile_case_name(const CompileCase& c) {
  return fmt::format("d{}_{}{}{}{}_{}", c.head_dim, c.dtype == DType::bf16 ? "bf16" : "fp16", c.causal ? "_causal" : "",
                     c.window ? "_window" : "", c.softcap ? "_softcap" : "", to_string(c.arch));
}

namespace {

// Two accepted exceptions. The first: the sm_90a wgmma dK/dV kernels at padded head dim 256
// keep dK, dV and the shared S^T/dP^T at 255 registers, and ptxas spills up to 8 bytes in some
// variants (4 bytes when deterministic; docs/perf-notes.md, "kernels from pieces").
// The second: the sm_90a forward compiled for two CTAs per SM is held to 128 registers, and
// at padded d96 ptxas spills up to 16 bytes (values around the K/V prefetch; the two CTAs
// per SM are worth far more: "two CTAs per SM").
int allowed_spill_bytes(const KernelSpec& s) {
  if (s.pass == Pass::bwd_dkdv && dkdv_mainloop(s) == DkdvMainloop::sm90_shared_scores) return 8;
  return s.min_blocks_per_sm() == 2 ? 16 : 0;
}

}  // namespace

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
