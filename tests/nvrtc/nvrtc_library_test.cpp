// The NVRTC loader: where it looks and in which order, which libraries it refuses and why,
// the error that lists every place looked, and CPU attention where no NVRTC is reachable.
// Stand-in libraries (fake_nvrtc.c) report the versions 11.8, 12.4, 12.9, 13.0 and 14.0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_library.h"
#include "tests/cache/cache_test_support.h"

namespace flashgen {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::ScopedEnv;
using testing_support::ScratchDir;
using testing_support::write_bytes;

std::vector<std::string> paths(const std::vector<NvrtcCandidate>& candidates) {
  std::vector<std::string> out;
  for (const NvrtcCandidate& c : candidates) out.push_back(c.path);
  return out;
}

// The message of the Error(no_device) that `body` throws.
template <typename Body>
std::string no_nvrtc_message(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::no_device) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return {};
}

TEST(NvrtcSearch, LooksAtTheHostsFilesThenTheToolkitsThenTheLinkersPath) {
  NvrtcSearch search;
  search.host = {{"/pip/cu13/libnvrtc.so.13", "pip cu13"}, {"/pip/cu12/libnvrtc.so.12", "pip cu12"}};
  search.cuda_home = "/opt/cuda-home";
  search.cuda_path = "/opt/cuda-path";
  EXPECT_EQ(paths(nvrtc_candidates(search)),
            (std::vector<std::string>{"/pip/cu13/libnvrtc.so.13", "/pip/cu12/libnvrtc.so.12",
                                      "/opt/cuda-home/lib64/libnvrtc.so.13", "/opt/cuda-home/lib64/libnvrtc.so.12",
                                      "/opt/cuda-path/lib64/libnvrtc.so.13", "/opt/cuda-path/lib64/libnvrtc.so.12",
                                      "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
                                      "libnvrtc.so.13", "libnvrtc.so.12"}));
  EXPECT_EQ(nvrtc_candidates(search)[2].origin, "$CUDA_HOME");
}

TEST(NvrtcSearch, FlashgenNvrtcPathsComeBeforeTheHostsFiles) {
  NvrtcSearch search;
  search.env_paths = {{"/venv/nvidia/cu13/lib/libnvrtc.so.13", "$FLASHGEN_NVRTC_PATHS"}};
  search.host = {{"/pip/cu12/libnvrtc.so.12", "pip cu12"}};
  search.default_locations = false;
  const auto candidates = nvrtc_candidates(search);
  EXPECT_EQ(paths(candidates),
            (std::vector<std::string>{"/venv/nvidia/cu13/lib/libnvrtc.so.13", "/pip/cu12/libnvrtc.so.12"}));
  EXPECT_EQ(candidates[0].origin, "$FLASHGEN_NVRTC_PATHS");
}

TEST(NvrtcSearch, FlashgenNvrtcIsTheOnlyPlaceLookedWhenSet) {
  NvrtcSearch search;
  search.flashgen_nvrtc = "/chosen/libnvrtc.so.12";
  search.host = {{"/pip/cu13/libnvrtc.so.13", "pip cu13"}};
  search.cuda_home = "/opt/cuda-home";
  const auto candidates = nvrtc_candidates(search);
  ASSERT_EQ(paths(candidates), (std::vector<std::string>{"/chosen/libnvrtc.so.12"}));
  EXPECT_EQ(candidates[0].origin, "$FLASHGEN_NVRTC");
}

TEST(NvrtcLoad, RefusesWhatIsNotAnAcceptedNvrtcAndSaysWhyForEach) {
  ScratchDir scratch;
  const std::string text_file = (scratch.path() / "libnvrtc.so.12").string();
  write_bytes(text_file, "not a library");
  const std::string missing = (scratch.path() / "missing" / "libnvrtc.so.13").string();
  const std::vector<NvrtcCandidate> candidates = {
      {missing, "first"},          {text_file, "second"},        {"libm.so.6", "third"},
      {FAKE_NVRTC_11_8, "fourth"}, {FAKE_NVRTC_14_0, "fifth"},   {FAKE_NVRTC_13_0, "sixth"},
  };
  const std::string message = no_nvrtc_message([&] { load_nvrtc(candidates, 12080); });
  EXPECT_THAT(message, HasSubstr("no usable NVRTC found"));
  EXPECT_THAT(message, HasSubstr(missing + " (first): no such file"));
  EXPECT_THAT(message, HasSubstr(text_file + " (second): cannot be loaded: "));
  EXPECT_THAT(message, HasSubstr("libm.so.6 (third): not NVRTC: it lacks nvrtcVersion"));
  EXPECT_THAT(message, HasSubstr(std::string(FAKE_NVRTC_11_8) + " (fourth): NVRTC 11.8, expected 12.4 to 13.x"));
  EXPECT_THAT(message, HasSubstr(std::string(FAKE_NVRTC_14_0) + " (fifth): NVRTC 14.0, expected 12.4 to 13.x"));
  EXPECT_THAT(message, HasSubstr(std::string(FAKE_NVRTC_13_0) +
                                 " (sixth): NVRTC 13.0 makes cubins for CUDA 13 drivers; the installed driver "
                                 "supports CUDA 12.8"));
  EXPECT_THAT(message, HasSubstr("FLASHGEN_NVRTC"));
}

TEST(NvrtcLoad, TakesTheFirstAcceptedOne) {
  const std::vector<NvrtcCandidate> candidates = {
      {FAKE_NVRTC_11_8, "old"}, {FAKE_NVRTC_12_4, "oldest accepted"}, {FAKE_NVRTC_13_0, "newer"}};
  const NvrtcLibrary nv = load_nvrtc(candidates, std::nullopt);
  EXPECT_EQ(nv.path, FAKE_NVRTC_12_4);
  EXPECT_EQ(nv.version(), "12.4");
  // Without a driver, and with a CUDA 13 one, NVRTC 13 is taken.
  EXPECT_EQ(load_nvrtc({{FAKE_NVRTC_13_0, "cu13"}}, std::nullopt).version(), "13.0");
  EXPECT_EQ(load_nvrtc({{FAKE_NVRTC_13_0, "cu13"}}, 13000).version(), "13.0");
}

TEST(NvrtcLoad, NoCandidatesSaysSo) {
  EXPECT_THAT(no_nvrtc_message([] { load_nvrtc({}, std::nullopt); }), HasSubstr("looked at: nothing"));
}

// The process's loader pointed at what the test chooses; restored afterwards.
class ProcessNvrtc : public ::testing::Test {
 protected:
  void TearDown() override { reset_nvrtc_library_for_testing(std::nullopt); }
};

TEST_F(ProcessNvrtc, AFlashgenNvrtcThatIsMissingIsAnErrorNamingItNotAFallback) {
  ScopedEnv chosen("FLASHGEN_NVRTC", "/nonexistent/libnvrtc.so.12");
  reset_nvrtc_library_for_testing(std::nullopt);
  const std::string message = no_nvrtc_message(
      [] { compile_source("k", "extern \"C\" __global__ void k() {}", Arch::sm_80); });
  EXPECT_THAT(message, HasSubstr("/nonexistent/libnvrtc.so.12 ($FLASHGEN_NVRTC): no such file"));
  EXPECT_THAT(message, Not(HasSubstr("/usr/local/cuda")));
  EXPECT_THAT(no_nvrtc_message([] { nvrtc_version(); }), HasSubstr("/nonexistent/libnvrtc.so.12"));
}

TEST_F(ProcessNvrtc, FlashgenNvrtcPathsAreTriedInOrder) {
  ScopedEnv paths_env("FLASHGEN_NVRTC_PATHS", std::string("/nonexistent/a.so::") + FAKE_NVRTC_12_4);
  reset_nvrtc_library_for_testing(std::nullopt);
  EXPECT_EQ(nvrtc_library().path, FAKE_NVRTC_12_4);
}

TEST_F(ProcessNvrtc, AFlashgenNvrtcThatLoadsIsTheOneUsed) {
  ScopedEnv chosen("FLASHGEN_NVRTC", FAKE_NVRTC_12_4);
  reset_nvrtc_library_for_testing(std::nullopt);
  EXPECT_EQ(nvrtc_library().path, FAKE_NVRTC_12_4);
  EXPECT_EQ(nvrtc_version(), "12.4");
  // NVRTC 12.4 has no --no-cache (12.9 added it, with the driver's compute cache).
  EXPECT_EQ(nvrtc_options(Arch::sm_90a, {}),
            (std::vector<std::string>{"--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v",
                                      "-default-device", "-minimal"}));
  // The stand-in fails every compile: the failure is a compile error, not a crash.
  try {
    compile_source("k", "extern \"C\" __global__ void k() {}", Arch::sm_80);
    FAIL() << "the stand-in compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::compile_error);
    EXPECT_THAT(e.what(), HasSubstr("k: NVRTC failed: nvrtcCreateProgram returned fake NVRTC"));
  }
}

// The NVRTC loaded is part of the cache key through its version (and the options it takes).
TEST_F(ProcessNvrtc, AnotherNvrtcVersionGivesAnotherKey) {
  ScratchDir dir;
  const auto key_with = [&](const char* library) {
    ScopedEnv chosen("FLASHGEN_NVRTC", library);
    reset_nvrtc_library_for_testing(std::nullopt);
    KernelCacheOptions options;
    options.dir = dir.path();
    options.generate = [](const KernelSpec& spec) { return testing_support::tiny_kernel(spec); };
    return KernelCache(options).key(KernelSpec{});
  };
  const std::string nvrtc13 = key_with(FAKE_NVRTC_13_0);
  EXPECT_EQ(key_with(FAKE_NVRTC_13_0), nvrtc13);
  EXPECT_NE(key_with(FAKE_NVRTC_12_9), nvrtc13);  // the same options: the version alone differs
}

TEST_F(ProcessNvrtc, CandidatesCannotBeAddedOnceNvrtcWasLookedFor) {
  NvrtcSearch nowhere;
  nowhere.default_locations = false;
  reset_nvrtc_library_for_testing(nowhere);
  EXPECT_THROW(nvrtc_library(), Error);
  try {
    add_nvrtc_candidate({"/late/libnvrtc.so.12", "late"});
    FAIL() << "a candidate was added after the search";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("/late/libnvrtc.so.12"), HasSubstr("already looked for")));
  }
}

// q random, k zero: every score is 0, so o is the mean of v over the keys and lse = log(seqlen_k).
TEST_F(ProcessNvrtc, CpuAttentionNeedsNoNvrtc) {
  NvrtcSearch nowhere;
  nowhere.default_locations = false;
  reset_nvrtc_library_for_testing(nowhere);
  ASSERT_THROW(nvrtc_library(), Error);

  constexpr int kSeqQ = 5, kSeqK = 7, kDim = 8;
  std::vector<float> q(kSeqQ * kDim), k(kSeqK * kDim, 0.0f), v(kSeqK * kDim), o(kSeqQ * kDim, NAN), lse(kSeqQ, NAN);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.7f * static_cast<float>(i));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 11) - 4.0f;
  ForwardArgs args;
  args.q = Tensor::contiguous(q.data(), DType::f32, {1, kSeqQ, 1, kDim});
  args.k = Tensor::contiguous(k.data(), DType::f32, {1, kSeqK, 1, kDim});
  args.v = Tensor::contiguous(v.data(), DType::f32, {1, kSeqK, 1, kDim});
  args.o = Tensor::contiguous(o.data(), DType::f32, {1, kSeqQ, 1, kDim});
  args.lse = Tensor::contiguous3(lse.data(), DType::f32, {1, 1, kSeqQ});
  Runtime runtime;
  runtime.forward(args);
  for (int i = 0; i < kSeqQ; ++i) {
    EXPECT_NEAR(lse[i], std::log(static_cast<float>(kSeqK)), 1e-5f) << "row " << i;
    for (int d = 0; d < kDim; ++d) {
      float mean = 0;
      for (int j = 0; j < kSeqK; ++j) mean += v[j * kDim + d] / kSeqK;
      EXPECT_NEAR(o[i * kDim + d], mean, 1e-5f) << "row " << i << " column " << d;
    }
  }
}

}  // namespace
}  // namespace flashgen
