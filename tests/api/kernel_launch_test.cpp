// The launch configuration of a KernelLaunch (runtime/kernel_launch.h), built without a
// GPU: the defaults add no attribute; a cluster and PDL become cuLaunchKernelEx attributes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/kernel_launch.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;

KernelLaunch hopper_launch() {
  KernelLaunch l;
  l.spec.arch = Arch::sm_90a;
  l.spec.warps = 8;
  l.grid = {32, 16, 2};
  return l;
}

TEST(KernelLaunchConfig, DefaultsAddNoAttribute) {
  KernelLaunch l = hopper_launch();
  LaunchAttributes a;
  const CUlaunchConfig c = launch_config(l, nullptr, a);
  EXPECT_EQ(a.count, 0u);
  EXPECT_EQ(c.numAttrs, 0u);
  EXPECT_EQ(c.attrs, nullptr);
  EXPECT_EQ(c.gridDimX, 32u);
  EXPECT_EQ(c.gridDimY, 16u);
  EXPECT_EQ(c.gridDimZ, 2u);
  EXPECT_EQ(c.blockDimX, 256u);
  EXPECT_EQ(c.blockDimY * c.blockDimZ, 1u);
  EXPECT_EQ(c.sharedMemBytes, static_cast<unsigned>(l.spec.shared_memory_bytes()));
  l.spec.arch = Arch::sm_80;  // the defaults launch anywhere
  EXPECT_EQ(launch_attributes(l).count, 0u);
}

TEST(KernelLaunchConfig, ClusterAndPdlBecomeAttributes) {
  KernelLaunch l = hopper_launch();
  l.cluster = {2, 1, 1};
  LaunchAttributes a = launch_attributes(l);
  ASSERT_EQ(a.count, 1u);
  EXPECT_EQ(a.items[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(a.items[0].value.clusterDim.x, 2u);
  EXPECT_EQ(a.items[0].value.clusterDim.y, 1u);
  EXPECT_EQ(a.items[0].value.clusterDim.z, 1u);

  l.programmatic_dependent_launch = true;
  const CUlaunchConfig c = launch_config(l, nullptr, a);
  ASSERT_EQ(c.numAttrs, 2u);
  EXPECT_EQ(c.attrs, a.items.data());
  EXPECT_EQ(c.attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(c.attrs[1].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(c.attrs[1].value.programmaticStreamSerializationAllowed, 1);

  l.cluster = {1, 1, 1};
  a = launch_attributes(l);
  ASSERT_EQ(a.count, 1u);
  EXPECT_EQ(a.items[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
}

TEST(KernelLaunchConfig, RejectsClustersTheGridOrArchCannotTake) {
  auto expect_rejected = [](const KernelLaunch& l, const std::string& mention) {
    try {
      launch_attributes(l);
      ADD_FAILURE() << "expected a rejection mentioning " << mention;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr(l.spec.uri()));
      EXPECT_THAT(e.what(), HasSubstr(mention));
    }
  };
  KernelLaunch l = hopper_launch();
  l.cluster = {3, 1, 1};
  expect_rejected(l, "cluster is 3x1x1, expected dimensions >= 1 dividing the grid 32x16x2");
  l.cluster = {0, 1, 1};
  expect_rejected(l, "cluster is 0x1x1");
  l.cluster = {4, 4, 1};
  expect_rejected(l, "16 CTAs, expected at most 8");
  l.cluster = {2, 1, 1};
  l.spec.arch = Arch::sm_89;
  expect_rejected(l, "a thread-block cluster needs sm_90 or later, the kernel is for sm_89");
  l.cluster = {1, 1, 1};
  l.programmatic_dependent_launch = true;
  expect_rejected(l, "programmatic dependent launch needs sm_90 or later");
}

}  // namespace
}  // namespace flashgen
