// The TMA descriptor layouts of the warp-specialised forward (runtime/tensor_maps.h), built
// without a GPU: dims, byte strides and boxes from the parameter block, and the up-front
// rejections of what TMA cannot describe, each naming the tensor and the stride.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "flashgen/flashgen.hpp"
#include "runtime/tensor_maps.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;

KernelSpec warp_specialized_spec() {
  KernelSpec s;
  s.arch = Arch::sm_90a;
  s.pass = Pass::fwd;
  s.head_dim = 72;
  s.block_m = 128;
  s.block_n = 176;
  s.warps = 12;  // two consumer warpgroups and a producer
  return s;
}

const void* fake_pointer(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }

// Contiguous (batch, seqlen, heads, head_dim) tensors, 2 x (100 | 77) x (8 | 2) x 72.
FlashAttentionParams bnhd_params() {
  FlashAttentionParams p{};
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 77;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 72;
  p.q = fake_pointer(0x10000);
  p.k = fake_pointer(0x20000);
  p.v = fake_pointer(0x30000);
  p.o = const_cast<void*>(fake_pointer(0x40000));
  p.q_stride = p.o_stride = {100LL * 8 * 72, 8 * 72, 72};
  p.k_stride = p.v_stride = {77LL * 2 * 72, 2 * 72, 72};
  return p;
}

// Runs tensor_map_layouts and expects an unsupported rejection mentioning `mention`.
void expect_rejected(const FlashAttentionParams& p, const std::string& mention) {
  try {
    tensor_map_layouts(warp_specialized_spec(), p);
    ADD_FAILURE() << "expected a rejection mentioning " << mention;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    EXPECT_THAT(e.what(), HasSubstr(mention));
    EXPECT_THAT(e.what(), HasSubstr("needs TMA-describable tensors"));
    EXPECT_THAT(e.what(), HasSubstr(warp_specialized_spec().uri()));
  }
}

TEST(TensorMapLayouts, SpecUnderTestIsWarpSpecialised) { EXPECT_TRUE(warp_specialized_spec().warp_specialized()); }

TEST(TensorMapLayouts, ContiguousBnhdInnermostFirst) {
  const FlashAttentionParams p = bnhd_params();
  const auto m = tensor_map_layouts(warp_specialized_spec(), p);
  EXPECT_STREQ(m[0].tensor, "q");
  EXPECT_STREQ(m[1].tensor, "k");
  EXPECT_STREQ(m[2].tensor, "v");
  EXPECT_STREQ(m[3].tensor, "o");
  EXPECT_EQ(m[0].address, p.q);
  EXPECT_EQ(m[1].address, p.k);
  EXPECT_EQ(m[2].address, p.v);
  EXPECT_EQ(m[3].address, p.o);
  for (const TensorMapLayout& t : m) EXPECT_EQ(t.dtype, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) << t.tensor;

  using Dims = std::array<cuuint64_t, 4>;
  using Strides = std::array<cuuint64_t, 3>;
  using Box = std::array<cuuint32_t, 4>;
  EXPECT_EQ(m[0].dims, (Dims{72, 100, 8, 2}));
  EXPECT_EQ(m[3].dims, (Dims{72, 100, 8, 2}));
  EXPECT_EQ(m[1].dims, (Dims{72, 77, 2, 2}));
  EXPECT_EQ(m[2].dims, (Dims{72, 77, 2, 2}));
  // Bytes: row, head, batch (the head stride is below the row stride in this layout).
  EXPECT_EQ(m[0].strides, (Strides{8 * 72 * 2, 72 * 2, 100 * 8 * 72 * 2}));
  EXPECT_EQ(m[1].strides, (Strides{2 * 72 * 2, 72 * 2, 77 * 2 * 72 * 2}));
  // 64 columns; block_m rows of q, block_n of k and v, 64 of o.
  EXPECT_EQ(m[0].box, (Box{64, 128, 1, 1}));
  EXPECT_EQ(m[1].box, (Box{64, 176, 1, 1}));
  EXPECT_EQ(m[2].box, (Box{64, 176, 1, 1}));
  EXPECT_EQ(m[3].box, (Box{64, 64, 1, 1}));
}

TEST(TensorMapLayouts, Fp16AndPermutedStrides) {
  KernelSpec s = warp_specialized_spec();
  s.dtype = DType::f16;
  FlashAttentionParams p = bnhd_params();
  p.q_stride = {8LL * 100 * 72, 72, 100 * 72};  // (batch, heads, seqlen, head_dim) in memory
  p.k_stride = {0, 2 * 72, 72};                 // k broadcast over the batch
  const auto m = tensor_map_layouts(s, p);
  for (const TensorMapLayout& t : m) EXPECT_EQ(t.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT16) << t.tensor;
  EXPECT_EQ(m[0].strides, (std::array<cuuint64_t, 3>{72 * 2, 100 * 72 * 2, 8 * 100 * 72 * 2}));
  EXPECT_EQ(m[1].strides, (std::array<cuuint64_t, 3>{2 * 72 * 2, 72 * 2, 0}));
}

// The warp-specialised dK/dV kernels' dQ accumulator: fp32 rows of the padded head dim in
// planes of a (batch, head) or, packed, a head, reduced into by the staged boxes: 32 columns x
// 64 queries (80 for 80-query tiles), 128-byte swizzled (the columns of a box past the row
// and its rows past the plane are clipped).
TEST(TensorMapLayouts, DqAccumulatorBoxesAreTheStagedBoxes) {
  KernelSpec s = warp_specialized_spec();
  s.pass = Pass::bwd_dkdv;
  s.head_dim = 72;  // padded to 80: the third box holds 16 columns
  s.block_m = 64;
  s.block_n = 128;
  ASSERT_TRUE(s.warp_specialized());
  EXPECT_TRUE(needs_dq_accum_map(s));
  FlashAttentionParams p = bnhd_params();
  p.dq_accum = reinterpret_cast<float*>(0x50000);
  p.seqlen_q_rounded = 128;
  p.dq_accum_rows = 2 * 8 * 128;
  const TensorMapLayout m = dq_accum_map_layout(s, p);
  EXPECT_STREQ(m.tensor, "dq_accum");
  EXPECT_EQ(m.address, p.dq_accum);
  EXPECT_EQ(m.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(m.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(m.dims, (std::array<cuuint64_t, 4>{80, 128, 16, 1}));
  EXPECT_EQ(m.strides, (std::array<cuuint64_t, 3>{80 * 4, 128 * 80 * 4, 16 * 128 * 80 * 4}));
  EXPECT_EQ(m.box, (std::array<cuuint32_t, 4>{32, 64, 1, 1}));

  // Packed sequences: one plane (a tile's rows past its sequence stay in the sequence's spare rows).
  KernelSpec packed = s;
  packed.varlen = true;
  FlashAttentionParams pv = p;
  pv.total_q = 150;
  pv.dq_accum_rows = 8 * (150 + 2 * 128);
  EXPECT_EQ(dq_accum_map_layout(packed, pv).dims, (std::array<cuuint64_t, 4>{80, 3248, 1, 1}));

  // d128's 80-query tiles: a box of 80 rows (each warpgroup's dQ^T covers every query).
  KernelSpec d128 = s;
  d128.head_dim = 128;
  d128.block_m = 80;
  ASSERT_TRUE(d128.problems().empty()) << d128.uri();
  EXPECT_EQ(dq_accum_map_layout(d128, p).box, (std::array<cuuint32_t, 4>{32, 80, 1, 1}));

  // d64's 128-query tiles: the same boxes, one row block per warpgroup.
  KernelSpec tall = s;
  tall.head_dim = 64;
  tall.block_m = 128;
  ASSERT_TRUE(tall.problems().empty()) << tall.uri();
  EXPECT_EQ(dq_accum_map_layout(tall, p).box, (std::array<cuuint32_t, 4>{32, 64, 1, 1}));

  // d256 (shared scores): the same boxes, staged over the Q and dO tiles.
  KernelSpec wide = s;
  wide.head_dim = 256;
  wide.block_n = 64;
  ASSERT_TRUE(wide.warp_specialized() && wide.problems().empty()) << wide.uri();
  EXPECT_TRUE(needs_dq_accum_map(wide));
  const TensorMapLayout w = dq_accum_map_layout(wide, p);
  EXPECT_EQ(w.dims, (std::array<cuuint64_t, 4>{256, 128, 16, 1}));
  EXPECT_EQ(w.box, (std::array<cuuint32_t, 4>{32, 64, 1, 1}));
  EXPECT_EQ(w.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);

  s.deterministic = true;  // dQ by the bwd_dq kernel: no accumulator
  EXPECT_FALSE(needs_dq_accum_map(s));
  s.deterministic = false;
  s.pass = Pass::fwd;
  EXPECT_FALSE(needs_dq_accum_map(s));
}

TEST(TensorMapLayouts, RejectsStridesThatAreNotWholeSixteenBytes) {
  FlashAttentionParams p = bnhd_params();
  p.k_stride.row = 36;
  expect_rejected(p, "k: stride[1] (seqlen_k) is 36 elements, expected a multiple of 8 elements (16 bytes)");
  p = bnhd_params();
  p.o_stride.head = 76;
  expect_rejected(p, "o: stride[2] (heads_q) is 76 elements");
  p = bnhd_params();
  p.v_stride.batch = 77 * 2 * 72 + 4;
  expect_rejected(p, "v: stride[0] (batch) is 11092 elements");
}

TEST(TensorMapLayouts, RejectsNegativeAndHugeStrides) {
  FlashAttentionParams p = bnhd_params();
  p.q_stride.head = -72;
  expect_rejected(p, "q: stride[2] (heads_q) is -72 elements");
  p = bnhd_params();
  p.q_stride.batch = std::int64_t{1} << 39;  // 2^40 bytes
  expect_rejected(p, "q: stride[0] (batch) is 549755813888 elements, expected a multiple of 8 elements (16 bytes) "
                     "from 0 to below 2^40 bytes");
  p.q_stride.batch = (std::int64_t{1} << 39) - 8;  // the largest TMA takes
  EXPECT_EQ(tensor_map_layouts(warp_specialized_spec(), p)[0].strides[2], (std::uint64_t{1} << 40) - 16);
  p.q_stride.batch = std::int64_t{1} << 62;  // would overflow as bytes
  expect_rejected(p, "q: stride[0] (batch) is 4611686018427387904 elements");
}

TEST(TensorMapLayouts, RejectsMisalignedPointersAndEmptyDims) {
  FlashAttentionParams p = bnhd_params();
  p.v = fake_pointer(0x30008);
  expect_rejected(p, "v: data pointer 0x30008 is not 16-byte aligned");
  p = bnhd_params();
  p.seqlen_k = 0;
  expect_rejected(p, "k: shape[1] (seqlen_k) is 0, expected 1..2^32");
}

TEST(TensorMapLayouts, EncodeRejectsBeforeAskingTheDriver) {
  // Without a driver too: a stride TMA cannot take is unsupported, not "no device".
  FlashAttentionParams p = bnhd_params();
  p.k_stride.row = 36;
  try {
    encode_tensor_maps(warp_specialized_spec(), p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    EXPECT_THAT(e.what(), HasSubstr("k: stride[1] (seqlen_k) is 36 elements"));
  }
}

}  // namespace
}  // namespace flashgen
