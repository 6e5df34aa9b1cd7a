// What validation accepts and the Problem it returns: geometry, defaults resolved,
// causal => window_right = 0, and the layouts each backend takes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_call.h"
#include "runtime/validate.h"

namespace flashgen::test {
namespace {

class ValidateTest : public ::testing::Test {
 protected:
  AttentionCall cpu_call() { return factory_.make(random_cpu_geometry(random_.rng)); }
  AttentionCall device_call() { return factory_.make(random_device_geometry(random_.rng)); }

  RandomSource random_;
  CallFactory factory_;
};

void expect_geometry(const Problem& p, const Geometry& g) {
  EXPECT_EQ(p.batch, g.batch);
  EXPECT_EQ(p.seqlen_q, g.seqlen_q);
  EXPECT_EQ(p.seqlen_k, g.seqlen_k);
  EXPECT_EQ(p.heads_q, g.heads_q);
  EXPECT_EQ(p.heads_kv, g.heads_kv);
  EXPECT_EQ(p.head_dim, g.head_dim);
  EXPECT_EQ(p.dtype, g.dtype);
  EXPECT_EQ(p.device, g.device);
}

float default_scale(std::int64_t head_dim) { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

TEST_F(ValidateTest, ForwardReturnsGeometryAndDefaultScale) {
  const AttentionCall call = cpu_call();
  const Problem p = validate_forward(call.forward());
  expect_geometry(p, call.geometry);
  EXPECT_TRUE(p.has_lse);
  EXPECT_FLOAT_EQ(p.options.softmax_scale, default_scale(call.geometry.head_dim));
  EXPECT_FALSE(p.options.causal);
  EXPECT_EQ(p.options.window_left, -1);
  EXPECT_EQ(p.options.window_right, -1);
  EXPECT_EQ(p.options.softcap, 0.0f);
}

TEST_F(ValidateTest, BackwardReturnsGeometryAndDefaultScale) {
  const AttentionCall call = cpu_call();
  const Problem p = validate_backward(call.backward());
  expect_geometry(p, call.geometry);
  EXPECT_TRUE(p.has_lse);
  EXPECT_FLOAT_EQ(p.options.softmax_scale, default_scale(call.geometry.head_dim));
}

TEST_F(ValidateTest, DeviceCallPassesValidation) {
  const AttentionCall call = device_call();
  expect_geometry(validate_forward(call.forward()), call.geometry);
  expect_geometry(validate_backward(call.backward()), call.geometry);
}

TEST_F(ValidateTest, ForwardWithoutLse) {
  AttentionCall call = cpu_call();
  call.lse = Tensor{};  // null data: lse not wanted; the rest of the view does not matter
  call.lse.rank = 0;
  const Problem p = validate_forward(call.forward());
  EXPECT_FALSE(p.has_lse);
}

TEST_F(ValidateTest, ExplicitOptionsAreKept) {
  AttentionCall call = cpu_call();
  std::uniform_real_distribution<float> positive(0.01f, 4.0f);
  call.options.softmax_scale = positive(random_.rng);
  call.options.softcap = positive(random_.rng);
  call.options.window_left = 3;
  call.options.window_right = 5;
  call.options.deterministic = true;
  for (const Problem& p : {validate_forward(call.forward()), validate_backward(call.backward())}) {
    EXPECT_EQ(p.options.softmax_scale, call.options.softmax_scale);
    EXPECT_EQ(p.options.softcap, call.options.softcap);
    EXPECT_EQ(p.options.window_left, 3);
    EXPECT_EQ(p.options.window_right, 5);
    EXPECT_FALSE(p.options.causal);
    EXPECT_TRUE(p.options.deterministic);
  }
}

TEST_F(ValidateTest, CausalSetsWindowRightToZero) {
  for (int right : {-1, 0, 1, 9}) {
    SCOPED_TRACE(right);
    AttentionCall call = cpu_call();
    call.options.causal = true;
    call.options.window_left = 4;
    call.options.window_right = right;
    for (const Problem& p : {validate_forward(call.forward()), validate_backward(call.backward())}) {
      EXPECT_TRUE(p.options.causal);
      EXPECT_EQ(p.options.window_right, 0);
      EXPECT_EQ(p.options.window_left, 4);
    }
  }
}

TEST_F(ValidateTest, CpuTakesPaddedAndBroadcastStrides) {
  AttentionCall call = cpu_call();
  const Geometry& g = call.geometry;
  // q rows padded to a larger head stride (in a buffer of its own that holds them); k/v
  // shared across the batch (stride 0).
  call.q.stride = {g.seqlen_q * g.heads_q * (g.head_dim + 5), g.heads_q * (g.head_dim + 5), g.head_dim + 5, 1};
  std::vector<std::uint64_t> padded_q(static_cast<std::size_t>(g.batch * call.q.stride[0] * 4 / 8 + 1));
  call.q.data = padded_q.data();
  call.k.stride[0] = 0;
  call.v.stride[0] = 0;
  EXPECT_NO_THROW(validate_forward(call.forward()));
  EXPECT_NO_THROW(validate_backward(call.backward()));
}

TEST_F(ValidateTest, CpuHeadDimLimits) {
  for (std::int64_t d : {std::int64_t{1}, kCpuMaxHeadDim}) {
    Geometry g = random_cpu_geometry(random_.rng);
    g.head_dim = d;
    const AttentionCall call = factory_.make(g);
    EXPECT_EQ(validate_forward(call.forward()).head_dim, d);
  }
}

TEST_F(ValidateTest, GpuHeadDimLimits) {
  for (std::int64_t d : {kGpuMinHeadDim, kGpuMaxHeadDim}) {
    Geometry g = random_device_geometry(random_.rng);
    g.head_dim = d;
    const AttentionCall call = factory_.make(g);
    EXPECT_EQ(validate_backward(call.backward()).head_dim, d);
  }
}

TEST_F(ValidateTest, GpuRowStridesAreFreeWhenHeadDimIsNotAMultipleOf8) {
  Geometry g = random_device_geometry(random_.rng);
  g.head_dim = 36;
  AttentionCall call = factory_.make(g);
  call.q.stride = {g.seqlen_q * g.heads_q * 37, g.heads_q * 37, 37, 1};
  EXPECT_NO_THROW(validate_forward(call.forward()));
}

TEST_F(ValidateTest, LseStridesOfSizeOneDimensionsDoNotMatter) {
  Geometry g = random_cpu_geometry(random_.rng);
  g.seqlen_q = 1;
  AttentionCall call = factory_.make(g);
  call.lse.stride[2] = 7;
  EXPECT_NO_THROW(validate_forward(call.forward()));
}

TEST_F(ValidateTest, MultiQueryAttention) {
  Geometry g = random_cpu_geometry(random_.rng);
  g.heads_kv = 1;
  g.heads_q = 8;
  const AttentionCall call = factory_.make(g);
  const Problem p = validate_backward(call.backward());
  EXPECT_EQ(p.heads_q, 8);
  EXPECT_EQ(p.heads_kv, 1);
}

}  // namespace
}  // namespace flashgen::test
