// The code generator without a GPU: golden sources, determinism, the spec rules
// that concern the generated kernels, and the selection table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "compiler/codegen.h"
#include "compiler/embedded_files.h"
#include "compiler/kernel_pieces.h"
#include "compiler/kernel_selection.h"

namespace flashgen {
namespace {

KernelSpec spec(Pass pass, int d, DType t, int bm, int bn, int w, int st, Arch arch) {
  KernelSpec s;
  s.pass = pass;
  s.head_dim = d;
  s.dtype = t;
  s.block_m = bm;
  s.block_n = bn;
  s.warps = w;
  s.stages = st;
  s.arch = arch;
  return s;
}

// One spec per pass, covering the code-changing options between them.
std::vector<KernelSpec> golden_specs() {
  std::vector<KernelSpec> out;
  KernelSpec fwd = spec(Pass::fwd, 128, DType::bf16, 128, 64, 8, 2, Arch::sm_90a);
  fwd.causal = true;
  out.push_back(fwd);
  out.push_back(spec(Pass::fwd, 80, DType::f16, 128, 64, 8, 2, Arch::sm_80));  // the mma.sync forward
  KernelSpec persistent = spec(Pass::fwd, 128, DType::bf16, 128, 128, 12, 2, Arch::sm_90a);  // warp-specialised
  persistent.persistent = true;
  out.push_back(persistent);
  KernelSpec dkdv = spec(Pass::bwd_dkdv, 64, DType::f16, 64, 128, 8, 2, Arch::sm_80);
  dkdv.softcap = true;
  out.push_back(dkdv);
  KernelSpec dq = spec(Pass::bwd_dq, 59, DType::bf16, 64, 32, 4, 2, Arch::sm_90);
  dq.window = true;
  dq.deterministic = true;
  out.push_back(dq);
  out.push_back(spec(Pass::bwd_preprocess, 96, DType::f16, 64, 64, 4, 1, Arch::sm_80));
  out.push_back(spec(Pass::bwd_dq_convert, 256, DType::bf16, 64, 64, 4, 1, Arch::sm_90a));
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Codegen, MatchesGoldenSources) {
  const std::filesystem::path golden = std::filesystem::path(FLASHGEN_SOURCE_DIR) / "tests/compiler/golden";
  const std::filesystem::path actual = std::filesystem::path(FLASHGEN_BINARY_DIR) / "golden-actual";
  for (const KernelSpec& s : golden_specs()) {
    const GeneratedSource g = generate_source(s);
    const std::filesystem::path file = golden / (g.kernel_name + ".cu");
    if (!std::filesystem::exists(file) || read_file(file) != g.source) {
      std::filesystem::create_directories(actual);
      std::ofstream(actual / (g.kernel_name + ".cu"), std::ios::binary) << g.source;
      ADD_FAILURE() << g.kernel_name << ": generated source differs from " << file << "; the new text is in "
                    << (actual / (g.kernel_name + ".cu")) << " (copy it over if the change is intended)";
    }
  }
}

TEST(Codegen, SameSpecGivesIdenticalBytes) {
  for (const KernelSpec& s : golden_specs()) {
    EXPECT_EQ(generate_source(s).source, generate_source(s).source) << s.uri();
  }
}

// The source is includes of embedded headers plus one instantiation: the spec's constants,
// the kernel assembled from its pieces, its shared-memory layout checked against the host's
// size, and the entry point named after the spec.
TEST(Codegen, SourceIncludesItsPiecesAndIsNamedAfterTheSpec) {
  std::set<std::string> embedded;
  for (const EmbeddedFile& f : embedded_files()) embedded.insert(std::string(f.name));
  for (const KernelSpec& s : golden_specs()) {
    const GeneratedSource g = generate_source(s);
    EXPECT_EQ(g.kernel_name, s.uri());
    std::istringstream lines(g.source);
    int includes = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#include", 0) != 0) continue;
      ++includes;
      const std::string name = line.substr(line.find('"') + 1, line.rfind('"') - line.find('"') - 1);
      EXPECT_TRUE(embedded.count(name)) << s.uri() << " includes " << name << ", which is not embedded";
    }
    EXPECT_GE(includes, 1) << s.uri();
    for (const std::string& h : kernel_pieces(s).headers)
      EXPECT_NE(g.source.find("#include \"" + h + "\""), std::string::npos) << s.uri();
    EXPECT_NE(g.source.find("using Kernel = " + kernel_pieces(s).kernel + ";"), std::string::npos) << s.uri();
    EXPECT_NE(g.source.find("static_assert(Kernel::kSharedBytes == " + std::to_string(s.shared_memory_bytes()) + ","),
              std::string::npos)
        << s.uri();
    EXPECT_NE(g.source.find("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(s.threads()) + ", " +
                            std::to_string(s.min_blocks_per_sm()) + ") " + s.uri() + "("),
              std::string::npos)
        << s.uri();
    EXPECT_NE(g.source.find("constexpr int kHeadDim = " + std::to_string(s.head_dim) + ";"), std::string::npos);
    EXPECT_NE(g.source.find("constexpr int kHeadDimPadded = " + std::to_string(s.padded_head_dim()) + ";"),
              std::string::npos);
  }
}

TEST(Codegen, OptionsChangeTheSource) {
  KernelSpec a = golden_specs()[0];
  KernelSpec b = a;
  b.causal = !a.causal;
  EXPECT_NE(generate_source(a).source, generate_source(b).source);
  EXPECT_NE(generate_source(a).source.find("constexpr bool kCausal = true;"), std::string::npos);
  EXPECT_NE(generate_source(b).source.find("constexpr bool kCausal = false;"), std::string::npos);
}

// sm_90a forward tiles of the warpgroup shape run on wgmma; everything else on mma.sync.
TEST(Codegen, WgmmaOnlyWhereTheTileHasTheWarpgroupShape) {
  struct Case {
    KernelSpec spec;
    bool wgmma;
  };
  const Case cases[] = {
      {spec(Pass::fwd, 128, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), true},
      {spec(Pass::fwd, 59, DType::f16, 128, 64, 8, 2, Arch::sm_90a), true},     // padded to 64
      {spec(Pass::fwd, 256, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), true},
      {spec(Pass::fwd, 128, DType::bf16, 128, 128, 8, 2, Arch::sm_90), false},  // wgmma needs sm_90a
      {spec(Pass::fwd, 96, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), true},   // 128-wide tiles, P.V as 64 + 32
      {spec(Pass::fwd, 224, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), true},   // P.V as 128 + 64 + 32
      {spec(Pass::fwd, 80, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), false},   // 80 is no multiple of 32
      {spec(Pass::bwd_dkdv, 96, DType::bf16, 64, 128, 8, 2, Arch::sm_90a), true},
      {spec(Pass::bwd_dkdv, 160, DType::bf16, 64, 128, 8, 2, Arch::sm_90a), false},
      {spec(Pass::bwd_dkdv, 64, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), true},   // 128-query tiles at d64
      {spec(Pass::bwd_dkdv, 128, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), false},  // ... only there
      {spec(Pass::bwd_dkdv, 256, DType::bf16, 64, 64, 8, 2, Arch::sm_90a), true},    // one head-dim half per warpgroup
      {spec(Pass::bwd_dkdv, 256, DType::bf16, 64, 64, 12, 2, Arch::sm_90a), true},   // ... beside a TMA producer
      {spec(Pass::bwd_dkdv, 128, DType::bf16, 64, 128, 12, 2, Arch::sm_90a), true},  // warp-specialised, 64 keys each
      {spec(Pass::bwd_dkdv, 256, DType::bf16, 32, 64, 8, 2, Arch::sm_90a), false},
      {spec(Pass::fwd, 256, DType::bf16, 128, 32, 8, 2, Arch::sm_90a), true},   // 32-key tiles (scores only)
      {spec(Pass::fwd, 128, DType::bf16, 128, 48, 8, 2, Arch::sm_90a), false},  // block_n 48
      {spec(Pass::fwd, 64, DType::bf16, 128, 64, 4, 2, Arch::sm_90a), false},   // 32 rows per warp
      {spec(Pass::bwd_dq, 128, DType::bf16, 64, 64, 4, 2, Arch::sm_90a), false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.spec.uses_wgmma(), c.wgmma) << c.spec.uri();
    const std::string src = generate_source(c.spec).source;
    EXPECT_NE(src.find(std::string("constexpr bool kWgmma = ") + (c.wgmma ? "true;" : "false;")), std::string::npos)
        << c.spec.uri();
    if (c.spec.pass == Pass::bwd_dkdv) {  // the dK/dV algorithm is the mainloop the kernel is assembled from
      const bool d256 = c.spec.padded_head_dim() == 256;
      const char* mainloop = !c.wgmma                      ? "DkdvMainloopSm80"
                             : c.spec.warp_specialized() ? (d256 ? "DkdvMainloopSm90WsSharedScores" : "DkdvMainloopSm90Ws")
                             : d256                       ? "DkdvMainloopSm90SharedScores"
                                                          : "DkdvMainloopSm90";
      EXPECT_NE(src.find(std::string("flash::") + mainloop + "<Traits>"), std::string::npos) << c.spec.uri();
    }
  }
}

// Two CTAs per SM (__launch_bounds__(256, 2): at most 128 registers) only where the forward's
// O and S fit: sm_90a wgmma on 8 warps, no softcap, 16-byte loads, shared memory twice.
TEST(Codegen, TwoCtasPerSmOnlyWhereTheForwardFits) {
  struct Case {
    KernelSpec spec;
    int min_blocks;
  };
  auto with_softcap = [](KernelSpec s) {
    s.softcap = true;
    return s;
  };
  const Case cases[] = {
      {spec(Pass::fwd, 96, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), 2},   // O 48 + S 32 per thread
      {spec(Pass::fwd, 64, DType::f16, 128, 64, 8, 2, Arch::sm_90a), 2},
      {spec(Pass::fwd, 96, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), 1},  // S 64: 112 in all
      {spec(Pass::fwd, 128, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), 1},  // O 64: 96 in all
      {spec(Pass::fwd, 90, DType::bf16, 128, 64, 8, 2, Arch::sm_90a), 1},   // element-wise loads
      {with_softcap(spec(Pass::fwd, 96, DType::bf16, 128, 64, 8, 2, Arch::sm_90a)), 1},
      {spec(Pass::fwd, 96, DType::bf16, 128, 64, 8, 2, Arch::sm_90), 1},    // mma.sync
      {spec(Pass::fwd, 64, DType::bf16, 64, 64, 4, 2, Arch::sm_90a), 1},    // one warpgroup
      {spec(Pass::bwd_dkdv, 64, DType::bf16, 128, 128, 8, 2, Arch::sm_90a), 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.spec.min_blocks_per_sm(), c.min_blocks) << c.spec.uri();
    EXPECT_NE(generate_source(c.spec).source.find("__launch_bounds__(" + std::to_string(c.spec.threads()) + ", " +
                                                  std::to_string(c.min_blocks) + ")"),
              std::string::npos)
        << c.spec.uri();
  }
}

void expect_rejected(const KernelSpec& s, const std::string& field) {
  try {
    generate_source(s);
    ADD_FAILURE() << s.uri() << " was accepted, expected a problem naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(Codegen, RejectsSpecsTheKernelsCannotRun) {
  // dK/dV: 8 warps over 48 keys (3 slices) split neither the keys nor the head dim evenly.
  expect_rejected(spec(Pass::bwd_dkdv, 128, DType::bf16, 64, 48, 8, 1, Arch::sm_90a), "warps");
  // dQ product: 8 warps over 2 query slices = 4 head-dim slices of 80 columns (10 n8 tiles).
  expect_rejected(spec(Pass::bwd_dkdv, 80, DType::bf16, 32, 128, 8, 1, Arch::sm_90a), "warps");
  // The warp-specialised dK/dV kernel: 128-query tiles only at d64 (S^T, dP^T, dK and dV in 240 registers).
  expect_rejected(spec(Pass::bwd_dkdv, 128, DType::bf16, 128, 128, 12, 2, Arch::sm_90a), "block_m/block_n");
  // ... and with softcap only 64-query tiles up to d128 (the slope spills on 80- and 128-query tiles).
  for (auto [d, bm, bn, valid] : {std::tuple{64, 128, 128, false}, {128, 80, 128, false}, {256, 64, 64, false},
                                  {64, 64, 128, true}, {96, 64, 128, true}, {128, 64, 128, true}}) {
    KernelSpec s = spec(Pass::bwd_dkdv, d, DType::bf16, bm, bn, 12, 2, Arch::sm_90a);
    s.softcap = true;
    if (valid)
      EXPECT_TRUE(s.problems().empty()) << s.uri();
    else
      expect_rejected(s, "softcap: set for the warp-specialised dK/dV kernel");
  }
  // Forward: each warp owns 16-row slices of block_m.
  expect_rejected(spec(Pass::fwd, 64, DType::bf16, 64, 64, 8, 2, Arch::sm_80), "block_m");
  // The dQ accumulator rows are rounded to 128.
  expect_rejected(spec(Pass::bwd_preprocess, 64, DType::bf16, 96, 64, 4, 1, Arch::sm_80), "block_m");
  // Shared memory over the arch's limit.
  expect_rejected(spec(Pass::fwd, 256, DType::bf16, 128, 128, 8, 3, Arch::sm_86), "shared memory");
  // The persistent forward with softcap spills on three warpgroups (d64 192 x 128) and at d256;
  // at d128 it does not.
  for (auto [d, bm, bn, w, valid] : {std::tuple{64, 192, 128, 16, false}, {256, 128, 80, 12, false},
                                     {128, 128, 128, 12, true}}) {
    KernelSpec s = spec(Pass::fwd, d, DType::bf16, bm, bn, w, 2, Arch::sm_90a);
    s.persistent = s.softcap = true;
    if (valid)
      EXPECT_TRUE(s.problems().empty()) << s.uri();
    else
      expect_rejected(s, "persistent: set with softcap");
  }
}

TEST(KernelSelection, EveryHeadDimGetsValidKernelsOnEveryArch) {
  for (Arch arch : kAllArchs)
    for (int d = 32; d <= 256; ++d)
      for (int flags = 0; flags < 16; ++flags) {
        ProblemKey k;
        k.head_dim = d;
        k.dtype = flags & 1 ? DType::bf16 : DType::f16;
        k.causal = flags & 2;
        k.softcap = flags & 4;
        k.deterministic = flags & 8;
        const auto fwd = select_forward_kernels(k, arch);
        const auto bwd = select_backward_kernels(k, arch);
        ASSERT_EQ(fwd.size(), 1u);
        ASSERT_EQ(bwd.size(), 3u);
        EXPECT_EQ(fwd[0].pass, Pass::fwd);
        EXPECT_EQ(bwd[0].pass, Pass::bwd_preprocess);
        EXPECT_EQ(bwd[1].pass, Pass::bwd_dkdv);
        EXPECT_EQ(bwd[2].pass, k.deterministic ? Pass::bwd_dq : Pass::bwd_dq_convert);
        // Only the backward's kernels differ for deterministic gradients: the forward has no
        // atomics, so a deterministic call runs (and caches, ships, tunes) the same forward.
        ProblemKey other = k;
        other.deterministic = !k.deterministic;
        EXPECT_EQ(fwd[0], select_forward_kernels(other, arch)[0]) << fwd[0].uri();
        EXPECT_FALSE(fwd[0].deterministic) << fwd[0].uri();
        for (int i = 0; i < 3; ++i) EXPECT_EQ(bwd[i].deterministic, k.deterministic) << bwd[i].uri();
        for (const KernelSpec& s : {fwd[0], bwd[0], bwd[1], bwd[2]}) {
          EXPECT_TRUE(s.problems().empty()) << s.uri();
          EXPECT_LE(s.shared_memory_bytes(), max_shared_memory(arch)) << s.uri();
          EXPECT_EQ(s.head_dim, d);
          EXPECT_EQ(s.causal, k.causal);
          EXPECT_EQ(s.softcap, k.softcap);
        }
      }
}

// sm_90a: the warp-specialised dK/dV kernel takes 128-query tiles at d64, masked or not,
// packed or not (measured: +7-12 %), 64-query tiles above d64.
TEST(KernelSelection, DkdvTakes128QueryTilesAtD64) {
  auto dkdv = [](int d, bool causal, bool window, bool varlen) {
    ProblemKey k;
    k.head_dim = d;
    k.dtype = DType::bf16;
    k.causal = causal;
    k.window = window;
    k.varlen = varlen;
    const KernelSpec s = select_backward_kernels(k, Arch::sm_90a)[1];
    EXPECT_TRUE(s.warp_specialized()) << s.uri();
    return s.block_m;
  };
  EXPECT_EQ(dkdv(64, true, false, false), 128);
  EXPECT_EQ(dkdv(64, false, true, false), 128);
  EXPECT_EQ(dkdv(64, true, false, true), 128);
  EXPECT_EQ(dkdv(64, false, false, false), 128);
  EXPECT_EQ(dkdv(64, false, false, true), 128);
  EXPECT_EQ(dkdv(128, true, false, false), 64);
  EXPECT_EQ(dkdv(96, true, false, false), 64);
}

// Softcap's dK/dV at d64..d128 on sm_90a: the warp-specialised kernel on 64-query tiles (1.4x
// the 8-warp wgmma kernel at d64, 4x mma.sync at d128 on the H100), masked or not.
TEST(KernelSelection, DkdvWithSoftcapIsWarpSpecialisedOn64QueryTiles) {
  for (int d : {64, 96, 128})
    for (bool causal : {false, true}) {
      ProblemKey k;
      k.head_dim = d;
      k.dtype = DType::bf16;
      k.softcap = true;
      k.causal = causal;
      const KernelSpec s = select_backward_kernels(k, Arch::sm_90a)[1];
      EXPECT_TRUE(s.warp_specialized()) << s.uri();
      EXPECT_EQ(s.block_m, 64) << s.uri();
      EXPECT_TRUE(s.problems().empty()) << s.uri();
    }
}

// The split-KV decode's warps split the keys as finely as the accumulator budget lets them:
// the rows of a warp times (head dim + its keys) stay within kDecodeAccumulatorBudget.
TEST(KernelSpec, DecodeWarpsSplitKeysWithinTheAccumulatorBudget) {
  auto splitkv = [](int d, int m, int n, int w) {
    KernelSpec s;
    s.pass = Pass::fwd_splitkv;
    s.head_dim = d;
    s.arch = Arch::sm_90a;
    s.block_m = m;
    s.block_n = n;
    s.warps = w;
    s.stages = 2;
    return s;
  };
  struct Want {
    int d, m, n, w, slices, rows;
  };
  for (const Want& c : {Want{128, 64, 128, 8, 2, 16},  // 4 slices: 32 rows x (128 + 32) / 32 = 160 fp32 values
                        Want{128, 64, 64, 8, 4, 32},   // 32 x (128 + 16) / 32 = 144: the budget itself
                        Want{64, 64, 128, 8, 4, 32},   // 32 x (64 + 32) / 32 = 96
                        Want{128, 16, 64, 4, 4, 16}, Want{64, 16, 128, 4, 4, 16}, Want{256, 32, 64, 8, 4, 16},
                        Want{128, 32, 64, 4, 4, 32}}) {
    const KernelSpec s = splitkv(c.d, c.m, c.n, c.w);
    EXPECT_EQ(s.decode_key_slices(), c.slices) << s.uri();
    EXPECT_EQ(s.decode_warp_rows(), c.rows) << s.uri();
    EXPECT_LE(s.accumulators_per_thread(), kDecodeAccumulatorBudget) << s.uri();
    EXPECT_TRUE(s.problems().empty()) << s.uri() << ": " << (s.problems().empty() ? "" : s.problems()[0]);
  }
  // The generated source states the host's split for the template.
  EXPECT_NE(generate_source(splitkv(128, 64, 128, 8)).source.find("kDecodeKeySlices = 2;"), std::string::npos);
  // Speculative decoding at d72..d128 (16 positions x 4 heads: 64 packed rows) takes 128-key
  // tiles where rows are 16-byte multiples, 64-key tiles otherwise (K/V staged in registers)
  // and where 144 KB of shared memory do not fit (sm_86).
  auto decode = [](int d, Arch arch) {
    ProblemKey k;
    k.head_dim = d;
    k.dtype = DType::bf16;
    k.heads_q = 32;
    k.heads_kv = 8;
    k.seqlen_q = 16;
    k.seqlen_k = 16384;
    const KernelSpec s = select_forward_kernels(k, arch).at(0);
    EXPECT_EQ(s.pass, Pass::fwd_splitkv);
    EXPECT_EQ(s.block_m, 64) << s.uri();
    return s.block_n;
  };
  EXPECT_EQ(decode(128, Arch::sm_90a), 128);
  EXPECT_EQ(decode(96, Arch::sm_80), 128);
  EXPECT_EQ(decode(111, Arch::sm_90a), 64);
  EXPECT_LT(decode(128, Arch::sm_86), 128);
}

// d128's 80-query dK/dV tile (FA3's, a tuning candidate) is a legal spec where it compiles
// without spills: dense batches, and packed ones unmasked and not deterministic; elsewhere the
// error names block_m and the variant. The selection keeps 64 (measured no faster).
TEST(KernelSpec, DkdvTakes80QueryTilesAtD128WhereTheyFit) {
  auto spec = [](bool causal, bool varlen, bool deterministic) {
    KernelSpec s;
    s.pass = Pass::bwd_dkdv;
    s.head_dim = 128;
    s.arch = Arch::sm_90a;
    s.block_m = 80;
    s.block_n = 128;
    s.warps = 12;
    s.stages = 2;
    s.causal = causal;
    s.varlen = varlen;
    s.deterministic = deterministic;
    return s;
  };
  for (int flags = 0; flags < 8; ++flags) {
    const KernelSpec s = spec(flags & 1, flags & 2, flags & 4);
    const bool legal = !s.varlen || (!s.causal && !s.deterministic);
    EXPECT_EQ(s.problems().empty(), legal) << s.uri();
    if (!legal) {
      EXPECT_NE(s.problems().at(0).find("block_m: got 80"), std::string::npos) << s.problems().at(0);
    }
  }
  KernelSpec d64 = spec(false, false, false);
  d64.head_dim = 64;
  EXPECT_FALSE(d64.problems().empty());
  ProblemKey k;
  k.head_dim = 128;
  EXPECT_EQ(select_backward_kernels(k, Arch::sm_90a)[1].block_m, 64);
}

// sm_90a at d256: the warp-specialised shared-scores kernel, 64 x 64 on 12 warps, masked or
// not, packed or not, deterministic or not; softcap and rows that are no 16-byte multiple
// keep the all-threads kernels.
TEST(KernelSelection, DkdvIsWarpSpecialisedAtD256) {
  for (int flags = 0; flags < 8; ++flags) {
    ProblemKey k;
    k.head_dim = 256;
    k.dtype = DType::bf16;
    k.causal = flags & 1;
    k.varlen = flags & 2;
    k.deterministic = flags & 4;
    const KernelSpec s = select_backward_kernels(k, Arch::sm_90a)[1];
    EXPECT_TRUE(s.warp_specialized()) << s.uri();
    EXPECT_EQ(dkdv_mainloop(s), DkdvMainloop::sm90_ws_shared_scores) << s.uri();
    EXPECT_EQ(s.block_m * 1000 + s.block_n, 64064) << s.uri();
    EXPECT_TRUE(s.problems().empty()) << s.uri();
  }
  ProblemKey softcap;
  softcap.head_dim = 256;
  softcap.softcap = true;
  EXPECT_FALSE(select_backward_kernels(softcap, Arch::sm_90a)[1].warp_specialized());
  ProblemKey odd;
  odd.head_dim = 250;
  EXPECT_FALSE(select_backward_kernels(odd, Arch::sm_90a)[1].warp_specialized());
}

}  // namespace
}  // namespace flashgen
