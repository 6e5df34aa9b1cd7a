// The machine code of the kernels the runtime selects on sm_90a, read without a GPU: NVRTC
// compiles them here and the dump's disassembler (the toolkit's, or pip's nvidia-cuda-nvdisasm
// on PATH, which scripts/test.sh installs) reads the cubins. A Hopper kernel showing mma.sync (HMMA)
// instead of wgmma (HGMMA), or no TMA, is on the slow path; one touching local memory spills.
// Skipped, saying so, where no disassembler is found.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "compiler/kernel_selection.h"
#include "runtime/kernel_dump.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNoDisassembler =
    "no nvdisasm or cuobjdump on PATH or in /usr/local/cuda/bin (pip install nvidia-cuda-nvdisasm)";

// The SASS of spec's kernel as compiled by NVRTC (the dump's disassembler).
std::string sass_of(const KernelSpec& spec) { return disassemble(compile_kernel(spec)).value_or(""); }

ProblemKey problem(int head_dim, bool causal, long long seqlen) {
  ProblemKey p;
  p.head_dim = head_dim;
  p.dtype = DType::bf16;
  p.causal = causal;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = seqlen;
  return p;
}

void expect_ops(const std::string& sass, const KernelSpec& s, std::initializer_list<const char*> present,
                std::initializer_list<const char*> absent) {
  ASSERT_GT(sass.size(), 1000u) << s.uri() << ": no listing";
  for (const char* op : present) EXPECT_NE(sass.find(op), std::string::npos) << s.uri() << ": no " << op << " in the SASS";
  for (const char* op : absent) EXPECT_EQ(sass.find(op), std::string::npos) << s.uri() << ": " << op << " in the SASS";
}

// The forward on the fast path: wgmma, TMA loads and stores, mbarrier waits; no mma.sync and
// no local memory (LDL/STL: spills), in every length bucket (persistent or not, O staged apart
// or over the V ring).
TEST(Sass, HopperForwardUsesTmaAndWgmma) {
  if (!find_disassembler()) GTEST_SKIP() << kNoDisassembler;
  for (const auto& [head_dim, causal] : {std::pair{64, true}, {96, false}, {128, false}, {128, true}, {256, true}})
    for (long long seqlen : {1024LL, 16384LL}) {
      const KernelSpec s = select_forward_kernels(problem(head_dim, causal, seqlen), Arch::sm_90a).at(0);
      EXPECT_TRUE(s.warp_specialized()) << s.uri();
      expect_ops(sass_of(s), s, {"HGMMA", "UTMALDG", "UTMASTG", "SYNCS"}, {"HMMA", "LDL", "STL"});
    }
}

// Above d64 the forward's steady-state loop waits for the scores (leaving the P.V of the tile
// before in flight: `gsb0, 0x1`) and for the P.V (`gsb0, 0x0`) with the softmax's exponentials
// between the two, so the P.V runs under the warpgroup's own softmax. ptxas hoists the second
// wait above the exponentials unless a block boundary stops it (fwd_mainloop_sm90.cuh,
// kRescaleBeforePv); a thread exponentiates block_n / 2 scores per tile (two rows).
TEST(Sass, HopperForwardRunsThePvUnderTheSoftmax) {
  if (!find_disassembler()) GTEST_SKIP() << kNoDisassembler;
  for (const auto& [head_dim, causal] : {std::pair{96, false}, {128, false}, {128, true}, {256, false}, {256, true}})
    for (long long seqlen : {1024LL, 16384LL}) {
      const KernelSpec s = select_forward_kernels(problem(head_dim, causal, seqlen), Arch::sm_90a).at(0);
      const std::string sass = sass_of(s);
      const size_t scores_wait = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1");
      ASSERT_NE(scores_wait, std::string::npos) << s.uri() << ": no wait leaving a product in flight";
      const size_t pv_wait = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", scores_wait);
      ASSERT_NE(pv_wait, std::string::npos) << s.uri() << ": no P.V wait after the scores' wait";
      int exponentials = 0;
      for (size_t at = sass.find("MUFU.EX2", scores_wait); at < pv_wait; at = sass.find("MUFU.EX2", at + 1))
        ++exponentials;
      EXPECT_GE(exponentials, s.block_n / 2) << s.uri() << ": the P.V wait sits above the softmax";
    }
}

// The dK/dV kernel: wgmma, TMA loads, mbarrier waits, dQ added by TMA reductions (UTMAREDG)
// rather than by atomics from the registers (RED); no mma.sync, no local memory.
TEST(Sass, HopperDkdvUsesTmaReductionsAndWgmma) {
  if (!find_disassembler()) GTEST_SKIP() << kNoDisassembler;
  for (const auto& [head_dim, causal] : {std::pair{64, true}, {96, false}, {128, false}, {128, true}, {256, true}}) {
    const KernelSpec s = select_backward_kernels(problem(head_dim, causal, 4096), Arch::sm_90a).at(1);
    EXPECT_TRUE(s.warp_specialized()) << s.uri();
    expect_ops(sass_of(s), s, {"HGMMA", "UTMALDG", "UTMAREDG", "SYNCS"}, {"HMMA", "RED.E.", "LDL", "STL"});
  }
}

// `flashgen dump --emit sass` finds the same disassembler and prints its listing.
TEST(Sass, DumpPrintsTheListing) {
  if (!find_disassembler()) GTEST_SKIP() << kNoDisassembler;
  const fs::path out = fs::temp_directory_path() / fmt::format("flashgen-sass-dump-{}.txt", ::getpid());
  const std::string command = fmt::format("'{}' dump --pass fwd --head-dim 64 --arch sm_90a --emit sass >'{}' 2>&1",
                                          FLASHGEN_CLI, out.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(out);
  EXPECT_EQ(text.find("SASS unavailable"), std::string::npos) << text.substr(0, 500);
  EXPECT_NE(text.find("/*0000*/"), std::string::npos) << text.substr(0, 500);
  EXPECT_NE(text.find("EXIT"), std::string::npos);
}

}  // namespace
}  // namespace flashgen::test
