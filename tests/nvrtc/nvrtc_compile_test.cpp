// NVRTC compiles without a GPU: tiny kernels to cubin for each arch, the report parsed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fmt/format.h>
#include <random>
#include <thread>

#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_library.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A kernel whose static shared memory is exactly `floats` * 4 bytes.
std::string shared_kernel(const std::string& name, int floats) {
  return fmt::format(R"(extern "C" __global__ void {0}(float* out) {{
  __shared__ float tile[{1}];
  tile[threadIdx.x % {1}] = out[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % {1}] * 2.0f;
}}
)",
                     name, floats);
}

int random_floats(unsigned& seed) {
  seed = flashgen::test::test_seed();
  std::mt19937 generator(seed);
  return std::uniform_int_distribution<int>(1, 4096)(generator);
}

bool is_elf(const std::string& bytes) { return bytes.size() > 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0; }

class EveryArch : public ::testing::TestWithParam<Arch> {};

TEST_P(EveryArch, TinyKernelCompilesAndReportsItsResources) {
  unsigned seed = 0;
  const int floats = random_floats(seed);
  SCOPED_TRACE(fmt::format("seed {} floats {}", seed, floats));
  const CompileOutput out = compile_source("tiny", shared_kernel("tiny", floats), GetParam(), {}, "tiny");
  EXPECT_TRUE(is_elf(out.cubin));
  EXPECT_GT(out.resources.registers, 0);
  EXPECT_EQ(out.resources.shared_bytes, 4 * floats);
  EXPECT_EQ(out.resources.barriers, 1);
  EXPECT_EQ(out.resources.spill_stores, 0);
  EXPECT_THAT(out.log, HasSubstr(fmt::format("Compiling entry function 'tiny' for '{}'", to_string(GetParam()))));
  EXPECT_TRUE(out.ptx.empty()) << "PTX is kept only on request";
  EXPECT_GT(out.compile_ms, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Nvrtc, EveryArch, ::testing::ValuesIn(kAllArchs),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Nvrtc, KeepsPtxOnRequest) {
  CompileOptions options;
  options.keep_ptx = true;
  const CompileOutput out = compile_source("tiny", shared_kernel("tiny", 32), Arch::sm_90a, options);
  EXPECT_THAT(out.ptx, HasSubstr(".target sm_90a"));
  EXPECT_THAT(out.ptx, HasSubstr(".entry tiny"));
  EXPECT_NE(out.ptx.back(), '\0');
  EXPECT_TRUE(is_elf(out.cubin));
}

// setmaxnreg exists only on sm_90a: the arch flag really reaches ptxas.
TEST(Nvrtc, ArchSpecificInstructionsNeedTheirArch) {
  const std::string source = R"(extern "C" __global__ void grow(float* out) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
  out[threadIdx.x] = 1.0f;
}
)";
  EXPECT_TRUE(is_elf(compile_source("grow", source, Arch::sm_90a).cubin));
  try {
    compile_source("grow", source, Arch::sm_90);
    FAIL() << "setmaxnreg compiled for sm_90";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), StartsWith("grow: NVRTC failed:\n"));
  }
}

TEST(Nvrtc, SyntaxErrorGivesCompileErrorWithTheLog) {
  const std::string source = "extern \"C\" __global__ void broken(int* y) { y[0] = 1 }\n";
  try {
    compile_source("broken_uri", source, Arch::sm_80);
    FAIL() << "a syntax error compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), StartsWith("broken_uri: NVRTC failed:\n"));
    EXPECT_THAT(e.what(), HasSubstr("error: expected a \";\""));
    EXPECT_THAT(e.what(), HasSubstr("broken_uri.cu(1)"));
  }
}

TEST(Nvrtc, CompileKernelNamesTheSpecInErrors) {
  KernelSpec spec;
  spec.arch = Arch::sm_90a;
  const GeneratedSource bad{.kernel_name = spec.uri(), .source = "this is not CUDA"};
  try {
    compile_kernel(spec, bad, {});
    FAIL() << "garbage compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), StartsWith(spec.uri() + ": NVRTC failed:\n"));
  }
}

// A warp-specialised kernel compiled with fewer registers than its launch allocates would
// hang in setmaxnreg.inc: refused, naming the counts and the flags. Without flags it compiles;
// NVRTC's fast-compile mode, which bounds the registers (12.8 on), gives way to a full compile.
TEST(Nvrtc, WarpSpecialisedKernelsNeedTheLaunchsRegisters) {
  KernelSpec spec;
  spec.arch = Arch::sm_90a;
  spec.head_dim = 128;
  spec.block_m = 128;
  spec.block_n = 128;
  spec.warps = 12;
  ASSERT_TRUE(spec.warp_specialized());
  EXPECT_EQ(compile_kernel(spec, {}).resources.registers, 168);
  // A source claiming a register split that ptxas compiles to a handful of registers.
  CompileOptions flags;
  flags.extra_flags = {"-DFLASHGEN_UNUSED=1"};
  GeneratedSource small{.kernel_name = "small", .source = shared_kernel("small", 64), .register_split = true};
  try {
    compile_kernel(spec, small, flags);
    FAIL() << "a warp-specialised kernel with fewer than 168 registers was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), StartsWith(spec.uri() + ": ptxas allocated "));
    EXPECT_THAT(e.what(), HasSubstr("needs the launch's full 168 per thread (384 threads)"));
    EXPECT_THAT(e.what(), HasSubstr("[-DFLASHGEN_UNUSED=1]"));
  }
  const NvrtcLibrary& nv = nvrtc_library();
  if (nv.major == 12 && nv.minor < 8) GTEST_SKIP() << "-Ofc needs NVRTC 12.8";
  // Last: NVRTC 13.0 keeps the fast-compile mode for later compiles of the process (ctest runs
  // each test in its own; docs/perf-notes.md, "-Ofc").
  CompileOptions fast;
  fast.extra_flags = {"-Ofc=mid"};  // ~100 registers for this kernel: compiled again in full
  const CompiledKernel k = compile_kernel(spec, fast);
  EXPECT_EQ(k.resources.registers, 168);
  EXPECT_THAT(k.log, HasSubstr("flashgen: fast-compile mode left "));
  EXPECT_THAT(k.log, HasSubstr("compiled again without it"));
}

TEST(Nvrtc, CompileKernelUsesTheSpecsArchAndEntry) {
  KernelSpec spec;
  spec.arch = Arch::sm_86;
  const GeneratedSource src{.kernel_name = spec.uri(), .source = shared_kernel(spec.uri(), 100)};
  const CompiledKernel k = compile_kernel(spec, src, {});
  EXPECT_EQ(k.kernel_name, spec.uri());
  EXPECT_EQ(k.source, src.source);
  EXPECT_EQ(k.resources.shared_bytes, 400);
  EXPECT_THAT(k.log, HasSubstr("for 'sm_86'"));
  EXPECT_FALSE(k.from_disk_cache);
}

TEST(Nvrtc, RegisterPressureShowsAsSpills) {
  const std::string source = R"(extern "C" __global__ void spilly(float* x, int n) {
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) acc[i] = x[i * n + threadIdx.x];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
#pragma unroll
  for (int i = 0; i < 96; ++i) x[i * n + threadIdx.x] = acc[i];
}
)";
  CompileOptions options;
  options.extra_flags = {"--maxrregcount=32"};
  const CompileOutput out = compile_source("spilly", source, Arch::sm_80, options, "spilly");
  EXPECT_LE(out.resources.registers, 32);
  EXPECT_GT(out.resources.spill_stores, 0);
  EXPECT_GT(out.resources.spill_loads, 0);
  EXPECT_GE(out.resources.stack_bytes, out.resources.spill_stores / 4);
}

TEST(Nvrtc, OptionsCarryTheArchAndTheEnvironmentFlags) {
  ASSERT_EQ(setenv("FLASHGEN_NVRTC_FLAGS", "  -DFLASHGEN_TEST_VALUE=7   --maxrregcount=64 ", 1), 0);
  const CompileOptions options = CompileOptions::from_environment();
  unsetenv("FLASHGEN_NVRTC_FLAGS");
  EXPECT_EQ(options.extra_flags, (std::vector<std::string>{"-DFLASHGEN_TEST_VALUE=7", "--maxrregcount=64"}));
  // --no-cache exists from NVRTC 12.9 (tests/nvrtc/nvrtc_library_test.cpp checks 12.4's list).
  std::vector<std::string> expected = {"--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v",
                                       "-default-device", "-minimal", "--no-cache",
                                       "-DFLASHGEN_TEST_VALUE=7", "--maxrregcount=64"};
  if (nvrtc_library().major == 12 && nvrtc_library().minor < 9) expected.erase(expected.begin() + 5);
  EXPECT_EQ(nvrtc_options(Arch::sm_90a, options), expected);

  const std::string source = R"(#if FLASHGEN_TEST_VALUE != 7
#error the flags did not reach NVRTC
#endif
extern "C" __global__ void flagged(float* out) { out[threadIdx.x] = FLASHGEN_TEST_VALUE; }
)";
  EXPECT_TRUE(is_elf(compile_source("flagged", source, Arch::sm_80, options).cubin));
  EXPECT_THROW(compile_source("flagged", source, Arch::sm_80, {}), Error);
}

TEST(Nvrtc, ParallelCompilesAreIndependent) {
  constexpr int kThreads = 6;
  std::vector<CompileOutput> outs(kThreads);
  std::vector<std::exception_ptr> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        const std::string name = fmt::format("k{}", t);
        outs[t] = compile_source(name, shared_kernel(name, 64 * (t + 1)), kAllArchs[t % 5], {}, name);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_FALSE(errors[t]) << "thread " << t;
    EXPECT_EQ(outs[t].resources.shared_bytes, 4 * 64 * (t + 1)) << "thread " << t;
    EXPECT_THAT(outs[t].log, HasSubstr(fmt::format("'k{}' for '{}'", t, to_string(kAllArchs[t % 5]))));
  }
}

TEST(Nvrtc, VersionIsMajorDotMinor) {
  EXPECT_THAT(nvrtc_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
}

// ctest runs these tests again with FLASHGEN_NVRTC set to pip's NVRTC 12 (tests/nvrtc/CMakeLists.txt)
// and FG_TEST_NVRTC_MAJOR=12: that NVRTC, not the toolkit's, must be the one compiling.
TEST(Nvrtc, TheNvrtcTheTestRunAsksForIsTheOneLoaded) {
  const char* major = std::getenv("FG_TEST_NVRTC_MAJOR");
  if (major == nullptr) GTEST_SKIP() << "FG_TEST_NVRTC_MAJOR unset: any NVRTC will do";
  EXPECT_THAT(nvrtc_version(), StartsWith(std::string(major) + "."));
}


}  // namespace
}  // namespace flashgen
