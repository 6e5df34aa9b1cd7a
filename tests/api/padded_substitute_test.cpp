// The padded substitute's CPU side (runtime/padded_substitute.h): which head dim stands in for
// which, and the row copies, run here by a host model of cuMemcpy3D over real layouts (the
// caller's contiguous, transposed, fused-QKV and row-padded tensors): every element lands
// where the padded tensor's strides say, the padded columns stay zero, and the copy back
// writes the caller's elements and nothing between them. The GPU label runs it on the device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/padded_substitute.h"

namespace flashgen::test {
namespace {

Problem dense(std::int64_t head_dim) {
  Problem p;
  p.batch = 2, p.seqlen_q = p.seqlen_k = 100, p.heads_q = p.heads_kv = 4, p.head_dim = head_dim;
  p.dtype = DType::bf16;
  p.device = 0;
  return p;
}

TEST(PaddedSubstitute, TheNextClassStandsInForOtherHeadDims) {
  EXPECT_EQ(substitute_head_dim(dense(1)), 64);
  EXPECT_EQ(substitute_head_dim(dense(32)), 64);
  EXPECT_EQ(substitute_head_dim(dense(65)), 128);
  EXPECT_EQ(substitute_head_dim(dense(96)), 128);
  EXPECT_EQ(substitute_head_dim(dense(112)), 128);
  EXPECT_EQ(substitute_head_dim(dense(129)), 256);
  EXPECT_EQ(substitute_head_dim(dense(192)), 256);
  for (int d : kSubstituteHeadDims) EXPECT_EQ(substitute_head_dim(dense(d)), std::nullopt) << d;
}

TEST(PaddedSubstitute, NoneWhereTheResultOrTheLayoutWouldDiffer) {
  Problem p = dense(112);
  p.options.deterministic = true;  // the calls before and after the compile must be bitwise equal
  EXPECT_EQ(substitute_head_dim(p), std::nullopt);
  p = dense(112), p.device = kCpu;
  EXPECT_EQ(substitute_head_dim(p), std::nullopt);
  p = dense(112), p.varlen = true;
  EXPECT_EQ(substitute_head_dim(p), std::nullopt);
  p = dense(112), p.paged = true;
  EXPECT_EQ(substitute_head_dim(p), std::nullopt);
  p = dense(112), p.has_seqused_k = true;
  EXPECT_EQ(substitute_head_dim(p), std::nullopt);
  p = dense(112), p.options.causal = true, p.options.window_left = 64, p.options.softcap = 30.0f;
  EXPECT_EQ(substitute_head_dim(p), 128);  // masks and softcap are the class kernels' own options
}

// A (B, N, H, cols) bf16 tensor over `memory` elements with the given strides.
Tensor view(std::array<std::int64_t, 4> shape, std::array<std::int64_t, 4> stride) {
  Tensor t;
  t.dtype = DType::bf16;
  t.device = 0;
  t.shape = shape;
  t.stride = stride;
  return t;
}

std::int64_t offset(const Tensor& t, std::int64_t b, std::int64_t n, std::int64_t h, std::int64_t c) {
  return b * t.stride[0] + n * t.stride[1] + h * t.stride[2] + c * t.stride[3];
}

// cuMemcpy3D on host bytes.
void run(const std::vector<RowCopy>& copies, const std::uint8_t* src, std::uint8_t* dst) {
  for (const RowCopy& c : copies)
    for (std::int64_t z = 0; z < c.depth; ++z)
      for (std::int64_t y = 0; y < c.height; ++y)
        std::memcpy(dst + c.dst_offset + (z * c.dst_height + y) * c.dst_pitch,
                    src + c.src_offset + (z * c.src_height + y) * c.src_pitch, static_cast<size_t>(c.width_bytes));
}

void check_round_trip(const Tensor& layout, std::int64_t memory, int cols) {
  SCOPED_TRACE(::testing::Message() << "shape " << layout.shape[0] << "x" << layout.shape[1] << "x" << layout.shape[2]
                                    << "x" << layout.shape[3] << " strides " << layout.stride[0] << ","
                                    << layout.stride[1] << "," << layout.stride[2] << " into " << cols);
  const auto plan = plan_row_copy(layout, cols);
  ASSERT_TRUE(plan.has_value());
  std::mt19937 rng(std::random_device{}());
  std::vector<std::uint16_t> user(static_cast<size_t>(memory));
  for (auto& x : user) x = static_cast<std::uint16_t>(rng());
  const auto& n = layout.shape;
  std::vector<std::uint16_t> padded(static_cast<size_t>(n[0] * n[1] * n[2] * cols), 0);
  Tensor pt = layout;
  pt.shape[3] = cols;
  pt.stride = {plan->padded_stride[0], plan->padded_stride[1], plan->padded_stride[2], 1};

  run(row_copies(layout, *plan, cols, true), reinterpret_cast<const std::uint8_t*>(user.data()),
      reinterpret_cast<std::uint8_t*>(padded.data()));
  for (std::int64_t b = 0; b < n[0]; ++b)
    for (std::int64_t s = 0; s < n[1]; ++s)
      for (std::int64_t h = 0; h < n[2]; ++h)
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::uint16_t want = c < n[3] ? user[static_cast<size_t>(offset(layout, b, s, h, c))] : 0;
          ASSERT_EQ(padded[static_cast<size_t>(offset(pt, b, s, h, c))], want) << b << "," << s << "," << h << "," << c;
        }

  // Back into poisoned memory: the caller's elements return, the bytes between them stay.
  for (auto& x : padded) x = static_cast<std::uint16_t>(x ^ 0x5a5a);
  std::vector<std::uint16_t> back(user.size(), 0xdead);
  run(row_copies(layout, *plan, cols, false), reinterpret_cast<const std::uint8_t*>(padded.data()),
      reinterpret_cast<std::uint8_t*>(back.data()));
  std::vector<bool> owned(user.size(), false);
  for (std::int64_t b = 0; b < n[0]; ++b)
    for (std::int64_t s = 0; s < n[1]; ++s)
      for (std::int64_t h = 0; h < n[2]; ++h)
        for (std::int64_t c = 0; c < n[3]; ++c) {
          const auto at = static_cast<size_t>(offset(layout, b, s, h, c));
          owned[at] = true;
          ASSERT_EQ(back[at], padded[static_cast<size_t>(offset(pt, b, s, h, c))]);
        }
  for (size_t i = 0; i < back.size(); ++i)
    if (!owned[i]) {
      ASSERT_EQ(back[i], 0xdead) << "element " << i << " is not the tensor's but was written";
    }
}

TEST(PaddedSubstitute, RowCopiesFollowEveryCommonLayout) {
  const std::int64_t B = 3, N = 5, H = 4, d = 40;
  check_round_trip(view({B, N, H, d}, {N * H * d, H * d, d, 1}), B * N * H * d, 64);       // contiguous
  check_round_trip(view({B, N, H, d}, {H * N * d, d, N * d, 1}), B * N * H * d, 64);       // (B, H, N, d) transposed
  check_round_trip(view({B, N, H, d}, {N * 3 * H * d, 3 * H * d, d, 1}), B * N * 3 * H * d, 64);  // q of a fused qkv
  check_round_trip(view({B, N, H, d}, {N * H * 48, H * 48, 48, 1}), B * N * H * 48, 128);  // padded rows
  check_round_trip(view({1, N, H, 112}, {0, H * 112, 112, 1}), N * H * 112, 128);           // batch 1, stride 0
  check_round_trip(view({B, 1, H, d}, {H * d, 7, d, 1}), B * H * d, 64);                     // one query: any n stride
  check_round_trip(view({1, 1, 1, d}, {0, 0, 0, 1}), d, 64);                                // one row
  check_round_trip(view({B, N, H, 64}, {N * H * 64, H * 64, 64, 1}), B * N * H * 64, 64);   // no padding needed
  // Rows of all heads padded (a position's stride H*d + pad, no whole number of d): one copy
  // per position, as in the GPU tests' layouts.
  check_round_trip(view({B, N, H, d}, {N * (H * d + 8), H * d + 8, d, 1}), B * N * (H * d + 8), 64);
  check_round_trip(view({B, N, H, 96}, {N * (H * 96 + 16), H * 96 + 16, 96, 1}), B * N * (H * 96 + 16), 128);
  check_round_trip(view({B, N, 1, d}, {N * (d + 24), d + 24, 0, 1}), B * N * (d + 24), 64);  // MQA, padded rows
}

TEST(PaddedSubstitute, OverlappingOrCostlyLayoutsAreRefused) {
  EXPECT_FALSE(plan_row_copy(view({2, 3, 2, 40}, {600, 100, 64, 1}), 64));  // a position's rows reach into the next's
  EXPECT_TRUE(plan_row_copy(view({2, 3, 2, 40}, {600, 104, 64, 1}), 64));   // ... which this one's do not
  const std::int64_t n = kMaxRowCopies / 2 + 1;                                // one copy per position: too many
  EXPECT_FALSE(plan_row_copy(view({2, n, 2, 40}, {n * 88, 88, 40, 1}), 64));
  EXPECT_TRUE(plan_row_copy(view({2, n, 2, 40}, {n * 80, 80, 40, 1}), 64)) << "one copy per batch index";
  EXPECT_FALSE(plan_row_copy(view({2, 3, 2, 40}, {480, 80, 20, 1}), 64));   // rows of 40 every 20: overlap
  EXPECT_FALSE(plan_row_copy(view({2, 3, 2, 40}, {480, 160, 80, 2}), 64));  // columns not contiguous
  EXPECT_FALSE(plan_row_copy(view({2, 3, 2, 130}, {780, 260, 130, 1}), 128));  // wider than the class
}

}  // namespace
}  // namespace flashgen::test
