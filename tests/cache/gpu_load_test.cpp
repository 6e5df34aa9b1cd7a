// The driver path on a machine with a GPU: context, load() into it, launch, results.
// Skips where no CUDA driver or device exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <array>
#include <random>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_launch.h"
#include "tests/cache/cache_test_support.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using testing_support::ScratchDir;
using testing_support::tiny_kernel;

class GpuLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or device";
  }
};

// The arch NVRTC should target for device 0 (sm_90a on Hopper).
Arch device0_arch() {
  const CudaDriver& d = cuda_driver();
  int major = 0, minor = 0;
  check_cuda(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), "attribute");
  check_cuda(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), "attribute");
  const int cc = major * 10 + minor;
  return cc >= 90 ? Arch::sm_90a : cc >= 89 ? Arch::sm_89 : cc >= 86 ? Arch::sm_86 : Arch::sm_80;
}

TEST_F(GpuLoad, EnsureContextMakesDevice0Current) {
  const CUcontext ctx = ensure_context(0);
  ASSERT_NE(ctx, nullptr);
  CUcontext current = nullptr;
  check_cuda(cuda_driver().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  EXPECT_EQ(current, ctx);
  EXPECT_EQ(ensure_context(0), ctx) << "the primary context is retained once";
}

TEST_F(GpuLoad, BadOrdinalIsAnInvalidArgument) {
  try {
    ensure_context(4096);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("device: got 4096"));
  }
}

TEST_F(GpuLoad, OutOfMemoryIsItsOwnStatus) {
  ensure_context(0);
  CUdeviceptr p = 0;
  try {
    check_cuda(cuda_driver().cuMemAlloc(&p, size_t{1} << 50), "cuMemAlloc", "1 PiB");
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("1 PiB"));
  }
}

TEST_F(GpuLoad, LoadedKernelRunsAndIsReusedPerContext) {
  ensure_context(0);
  ScratchDir dir;
  KernelCacheOptions options;
  options.dir = dir.path();
  options.generate = [](const KernelSpec& s) { return tiny_kernel(s); };
  KernelCache cache(options);
  KernelSpec spec;
  spec.arch = device0_arch();
  spec.head_dim = 96;

  const LoadedKernel k = cache.load(spec);
  ASSERT_NE(k.function, nullptr);
  EXPECT_EQ(cache.load(spec).function, k.function);

  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  constexpr int kThreads = 96;
  std::vector<float> host(kThreads), back(kThreads, std::nanf(""));
  for (float& x : host) x = dist(gen);

  const CudaDriver& d = cuda_driver();
  CUdeviceptr buffer = 0;
  check_cuda(d.cuMemAlloc(&buffer, sizeof(float) * kThreads), "cuMemAlloc");
  check_cuda(d.cuMemcpyHtoD(buffer, host.data(), sizeof(float) * kThreads), "cuMemcpyHtoD");
  void* args[] = {&buffer};
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kThreads;
  config.blockDimY = config.blockDimZ = 1;
  check_cuda(d.cuLaunchKernelEx(&config, k.function, args, nullptr), "cuLaunchKernelEx");
  check_cuda(d.cuCtxSynchronize(), "cuCtxSynchronize");
  check_cuda(d.cuMemcpyDtoH(back.data(), buffer, sizeof(float) * kThreads), "cuMemcpyDtoH");
  check_cuda(d.cuMemFree(buffer), "cuMemFree");
  // tiny_kernel: out = out * head_dim + (block_m + block_n), in fp32, fused or not: the
  // rounding error is a few ulps of the larger term, not of the (possibly cancelled) result.
  for (int i = 0; i < kThreads; ++i) {
    const double product = double(host[i]) * spec.head_dim, offset = spec.block_m + spec.block_n;
    const double scale = std::max(std::abs(product), offset);
    EXPECT_NEAR(back[i], product + offset, 4 * 1.2e-7 * scale) << i;
  }
}

// launch_kernel's attributes reach the device: each CTA writes the size of its cluster
// (%cluster_nctarank, 1 outside a cluster); PDL rides along (the kernel needs no wait).
TEST_F(GpuLoad, ClusterAndPdlLaunchAttributesReachTheKernel) {
  ensure_context(0);
  if (device0_arch() != Arch::sm_90a) GTEST_SKIP() << "clusters and PDL need sm_90";
  ScratchDir dir;
  KernelCacheOptions options;
  options.dir = dir.path();
  options.generate = [](const KernelSpec& s) {
    return GeneratedSource{s.uri(), fmt::format("extern \"C\" __global__ void {}(unsigned* out) {{\n"
                                                "  unsigned n;\n"
                                                "  asm(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(n));\n"
                                                "  if (threadIdx.x == 0) out[blockIdx.x] = n;\n}}\n",
                                                s.uri())};
  };
  KernelCache cache(options);
  KernelLaunch l;
  l.spec.arch = Arch::sm_90a;
  l.grid = {8, 1, 1};
  const CudaDriver& d = cuda_driver();
  CUdeviceptr out = 0;
  check_cuda(d.cuMemAlloc(&out, sizeof(unsigned) * 8), "cuMemAlloc");
  void* args[] = {&out};
  for (const std::array<unsigned, 3> cluster : {std::array<unsigned, 3>{1, 1, 1}, {2, 1, 1}, {4, 1, 1}}) {
    l.cluster = cluster;
    l.programmatic_dependent_launch = cluster[0] == 4;
    launch_kernel(cache.load(l.spec).function, l, nullptr, args);
    check_cuda(d.cuCtxSynchronize(), "cuCtxSynchronize");
    std::vector<unsigned> sizes(8);
    check_cuda(d.cuMemcpyDtoH(sizes.data(), out, sizeof(unsigned) * 8), "cuMemcpyDtoH");
    EXPECT_THAT(sizes, ::testing::Each(cluster[0])) << "cluster " << cluster[0];
  }
  check_cuda(d.cuMemFree(out), "cuMemFree");
}

}  // namespace
}  // namespace flashgen
