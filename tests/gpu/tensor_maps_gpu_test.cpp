// The TMA descriptors of the warp-specialised forward (runtime/tensor_maps.h) with a real
// driver: cuTensorMapEncodeTiled takes every layout the runtime accepts (contiguous BNHD,
// BHND, broadcast strides, odd lengths, head dims 72 and 256), and on Hopper the maps move
// the right elements: a box loaded through the parameter block's map is compared with the
// tensor on the host, zero fill past the ends included, and a stored box is clipped at
// the ends. Skips where there is no GPU (the round trips: no sm_90).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/tensor_maps.h"

namespace flashgen {
namespace {

using test::DeviceBuffer;
using ::testing::HasSubstr;

enum class Order { bnhd, bhnd };  // memory order of (batch, seqlen, heads, head_dim)

struct Case {
  const char* name;
  int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  Order order;
  DType dtype;
  int block_m, block_n;
  bool broadcast_kv = false;  // k and v with batch stride 0 (one copy for every batch)
};

// Element strides of a (batch, seqlen, heads, head_dim) tensor whose rows are `row_elems` apart.
FlashStrides strides_of(Order order, int seqlen, int heads, int row_elems) {
  const long long r = row_elems;
  if (order == Order::bnhd) return {seqlen * heads * r, heads * r, r};
  return {heads * seqlen * r, r, seqlen * r};
}

// Elements a tensor spans: its last element's offset plus one.
std::size_t span(int batch, int seqlen, int heads, int head_dim, const FlashStrides& s) {
  return static_cast<std::size_t>((batch - 1) * s.batch + (seqlen - 1) * s.row + (heads - 1) * s.head + head_dim);
}

KernelSpec spec_of(const Case& c) {
  KernelSpec s;
  s.arch = Arch::sm_90a;
  s.pass = Pass::fwd;
  s.head_dim = c.head_dim;
  s.dtype = c.dtype;
  s.block_m = c.block_m;
  s.block_n = c.block_n;
  s.warps = 4 * (c.block_m / 64 + 1);
  return s;
}

// A problem's q, k, v, o in device memory, rows padded to a multiple of 8 elements.
struct Tensors {
  FlashAttentionParams params{};
  DeviceBuffer q, k, v, o;

  explicit Tensors(const Case& c) {
    const int row = (c.head_dim + 7) / 8 * 8;
    FlashAttentionParams& p = params;
    p.batch = c.batch;
    p.seqlen_q = c.seqlen_q;
    p.seqlen_k = c.seqlen_k;
    p.heads_q = c.heads_q;
    p.heads_kv = c.heads_kv;
    p.head_dim = c.head_dim;
    p.q_stride = p.o_stride = strides_of(c.order, c.seqlen_q, c.heads_q, row);
    p.k_stride = p.v_stride = strides_of(c.order, c.seqlen_k, c.heads_kv, row);
    if (c.broadcast_kv) p.k_stride.batch = p.v_stride.batch = 0;
    q = DeviceBuffer(2 * span(c.batch, c.seqlen_q, c.heads_q, c.head_dim, p.q_stride));
    o = DeviceBuffer(2 * span(c.batch, c.seqlen_q, c.heads_q, c.head_dim, p.o_stride));
    k = DeviceBuffer(2 * span(c.batch, c.seqlen_k, c.heads_kv, c.head_dim, p.k_stride));
    v = DeviceBuffer(2 * span(c.batch, c.seqlen_k, c.heads_kv, c.head_dim, p.v_stride));
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.o = o.data();
  }
};

bool all_zero(const FlashTensorMap& m) {
  return std::all_of(std::begin(m.opaque), std::end(m.opaque), [](unsigned long long x) { return x == 0; });
}

int device0_compute_capability() {
  const CudaDriver& d = cuda_driver();
  int major = 0, minor = 0;
  check_cuda(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), "attribute");
  check_cuda(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), "attribute");
  return major * 10 + minor;
}

class TensorMapsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
  }
};

class TensorMapsEncode : public TensorMapsGpu, public ::testing::WithParamInterface<Case> {};

TEST_P(TensorMapsEncode, DriverTakesTheLayout) {
  const Case& c = GetParam();
  Tensors t(c);
  ASSERT_NO_THROW(encode_tensor_maps(spec_of(c), t.params));
  for (const FlashTensorMap* m : {&t.params.tma_q, &t.params.tma_k, &t.params.tma_v, &t.params.tma_o})
    EXPECT_FALSE(all_zero(*m));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TensorMapsEncode,
    ::testing::Values(Case{"bnhd_d128_bf16", 2, 1024, 1024, 16, 4, 128, Order::bnhd, DType::bf16, 128, 128},
                      Case{"bhnd_d64_fp16", 2, 512, 768, 8, 8, 64, Order::bhnd, DType::f16, 128, 176},
                      Case{"odd_lengths_d72", 3, 333, 1, 5, 1, 72, Order::bnhd, DType::bf16, 192, 128},
                      Case{"bhnd_odd_d72", 1, 17, 4099, 3, 3, 72, Order::bhnd, DType::f16, 128, 64},
                      Case{"bnhd_d256", 2, 200, 300, 4, 2, 256, Order::bnhd, DType::bf16, 128, 80},
                      Case{"bhnd_d256_m192_n256", 1, 1000, 1000, 2, 1, 256, Order::bhnd, DType::bf16, 192, 256},
                      Case{"broadcast_kv", 4, 129, 257, 8, 2, 128, Order::bnhd, DType::bf16, 128, 128, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The warp-specialised dK/dV kernel's maps: q, k, v, dout and the fp32 dQ accumulator in
// planes of a (batch, head), whose box is wider than its rows (the staging tile's pad, clipped
// on the reduction), or at d256 32 columns wide and swizzled, with 64 rows or (d128's 80-query
// tiles) 80.
TEST_F(TensorMapsGpu, DriverTakesTheDkdvMapsAndTheDqAccumulator) {
  for (const auto& [head_dim, block_m] : {std::pair{64, 64}, {80, 64}, {128, 64}, {128, 80}, {256, 64}}) {
    const Case c{"dkdv", 2, 300, 300, 4, 2, head_dim, Order::bnhd, DType::bf16, block_m, head_dim == 256 ? 64 : 128};
    Tensors t(c);
    KernelSpec s = spec_of(c);
    s.pass = Pass::bwd_dkdv;
    s.warps = 12;  // a producer warpgroup and two consumers of 64 keys
    ASSERT_TRUE(needs_dq_accum_map(s) && s.problems().empty()) << s.uri();
    t.params.dout = t.o.data();
    t.params.dout_stride = t.params.o_stride;
    t.params.seqlen_q_rounded = 384;
    t.params.dq_accum_rows = 2 * 4 * 384;
    DeviceBuffer accum(static_cast<std::size_t>(t.params.dq_accum_rows) * s.padded_head_dim() * sizeof(float));
    t.params.dq_accum = static_cast<float*>(accum.data());
    ASSERT_NO_THROW(encode_tensor_maps(s, t.params)) << s.uri();
    for (const FlashTensorMap* m : {&t.params.tma_q, &t.params.tma_k, &t.params.tma_v, &t.params.tma_do,
                                    &t.params.tma_dq_accum})
      EXPECT_FALSE(all_zero(*m)) << s.uri();
  }
}

// Descriptors come from the per-thread cache when the layout repeats: the same bytes as the
// driver's, and any change of address, size or stride (here: the same buffer as another
// problem's rows) gives the driver's descriptor of that layout, not a cached one.
TEST_F(TensorMapsGpu, RepeatedLayoutsGiveTheDriversDescriptors) {
  const Case a{"a", 2, 300, 300, 4, 2, 128, Order::bnhd, DType::bf16, 128, 128};
  Case b = a;
  b.seqlen_k = 200;  // k and v: other sizes, other strides
  Tensors ta(a), tb(b);
  tb.params.q = ta.params.q;  // q of b: the same address and layout as a's
  const auto bytes = [](const FlashTensorMap& m) { return std::vector<unsigned long long>(std::begin(m.opaque), std::end(m.opaque)); };
  encode_tensor_maps(spec_of(a), ta.params);
  const FlashAttentionParams first = ta.params;
  for (int i = 0; i < 3; ++i) {
    FlashAttentionParams again = ta.params;
    again.tma_q = again.tma_k = again.tma_v = again.tma_o = FlashTensorMap{};
    encode_tensor_maps(spec_of(a), again);
    EXPECT_EQ(bytes(again.tma_q), bytes(first.tma_q));
    EXPECT_EQ(bytes(again.tma_k), bytes(first.tma_k));
    EXPECT_EQ(bytes(again.tma_o), bytes(first.tma_o));
    encode_tensor_maps(spec_of(b), tb.params);
    EXPECT_EQ(bytes(tb.params.tma_q), bytes(first.tma_q)) << "the same layout";
    EXPECT_NE(bytes(tb.params.tma_k), bytes(first.tma_k)) << "another layout";
  }
  // b's k rebuilt at a's k address: a layout never seen, encoded by the driver.
  tb.params.k = ta.params.k;
  encode_tensor_maps(spec_of(b), tb.params);
  EXPECT_NE(bytes(tb.params.tma_k), bytes(first.tma_k));
  tb.params.k_stride = ta.params.k_stride;
  tb.params.seqlen_k = ta.params.seqlen_k;
  encode_tensor_maps(spec_of(b), tb.params);
  EXPECT_EQ(bytes(tb.params.tma_k), bytes(first.tma_k)) << "a's layout again";
}

TEST_F(TensorMapsGpu, DriverRejectionNamesTheTensorAndTheResult) {
  const Case c{"box_too_tall", 1, 128, 128, 2, 2, 64, Order::bnhd, DType::bf16, 128, 512};  // TMA boxes: <= 256 rows
  Tensors t(c);
  try {
    encode_tensor_maps(spec_of(c), t.params);
    FAIL() << "a box of 512 rows was encoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    EXPECT_THAT(e.what(), HasSubstr("k: cuTensorMapEncodeTiled failed with CUDA_ERROR_INVALID_VALUE"));
    EXPECT_THAT(e.what(), HasSubstr("shape (batch, seqlen_k, heads_kv, head_dim) = (1, 128, 2, 64)"));
    EXPECT_THAT(e.what(), HasSubstr("strides (16384, 128, 64, 1) elements"));
    EXPECT_THAT(e.what(), HasSubstr("box 64x512"));
    EXPECT_THAT(e.what(), HasSubstr("needs TMA-describable tensors"));
  }
}

// One thread copies a box between global memory and 1024-byte aligned shared memory (the
// 128-byte swizzle's period) through a map of the parameter block, exactly as the kernels
// name them; the block then moves the box's bytes from or to `box`.
constexpr const char* kRoundTripSource = R"(
#include "params/attention_params.h"

__device__ const FlashTensorMap* pick(const FlashAttentionParams& p, int which) {
  return which == 0 ? &p.tma_q : which == 1 ? &p.tma_k : which == 2 ? &p.tma_v : &p.tma_o;
}

__device__ unsigned box_address(unsigned char* smem) {
  return ((unsigned)__cvta_generic_to_shared(smem) + 8 + 1023) & ~1023u;
}

extern "C" __global__ void tma_load_box(const __grid_constant__ FlashAttentionParams p, int which, int c0, int c1,
                                        int c2, int c3, unsigned bytes, unsigned char* box) {
  extern __shared__ unsigned char smem[];
  const unsigned bar = (unsigned)__cvta_generic_to_shared(smem), dst = box_address(smem);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
        "[%2];" ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(pick(p, which))), "r"(bar), "r"(c0), "r"(c1),
        "r"(c2), "r"(c3)
        : "memory");
    unsigned done = 0;
    while (!done)
      asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0; selp.u32 %0, 1, 0, q; }"
                   : "=r"(done) : "r"(bar) : "memory");
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) box[i] = smem[dst - bar + i];
}

extern "C" __global__ void tma_store_box(const __grid_constant__ FlashAttentionParams p, int which, int c0, int c1,
                                         int c2, int c3, unsigned bytes, const unsigned char* box) {
  extern __shared__ unsigned char smem[];
  const unsigned base = (unsigned)__cvta_generic_to_shared(smem), src = box_address(smem);
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) smem[src - base + i] = box[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stores, visible to the copy engine
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                     reinterpret_cast<unsigned long long>(pick(p, which))),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}
)";

struct RoundTripKernels {
  CUmodule module = nullptr;
  CUfunction load = nullptr, store = nullptr;

  RoundTripKernels() {
    const CudaDriver& d = cuda_driver();
    const CompileOutput out = compile_source("tensor_maps_round_trip", kRoundTripSource, Arch::sm_90a);
    check_cuda(d.cuModuleLoadData(&module, out.cubin.data()), "cuModuleLoadData");
    check_cuda(d.cuModuleGetFunction(&load, module, "tma_load_box"), "cuModuleGetFunction");
    check_cuda(d.cuModuleGetFunction(&store, module, "tma_store_box"), "cuModuleGetFunction");
  }
  ~RoundTripKernels() {
    if (module) cuda_driver().cuModuleUnload(module);
  }
  RoundTripKernels(const RoundTripKernels&) = delete;
  RoundTripKernels& operator=(const RoundTripKernels&) = delete;
};

enum Which : int { kQ = 0, kK = 1, kV = 2, kO = 3 };

// The box's bytes in shared memory: rows of 128 bytes whose 16-byte chunks are XOR-swizzled
// by the row within each 8-row (1024-byte) period.
std::size_t swizzled_offset(int row, int col) {
  return static_cast<std::size_t>(row) * 128 + static_cast<std::size_t>(((col / 8) ^ (row % 8)) * 16 + (col % 8) * 2);
}

// A distinct, nonzero 16-bit pattern per element offset.
std::uint16_t pattern(std::size_t offset) { return static_cast<std::uint16_t>(offset * 2654435761u >> 7 | 1u); }

void run_box(CUfunction f, FlashAttentionParams& p, int which, std::array<int, 4> coord, unsigned bytes,
             CUdeviceptr box) {
  const CudaDriver& d = cuda_driver();
  const int shared = static_cast<int>(bytes) + 2048;
  check_cuda(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared), "cuFuncSetAttribute");
  void* args[] = {&p, &which, &coord[0], &coord[1], &coord[2], &coord[3], &bytes, &box};
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(shared);
  check_cuda(d.cuLaunchKernelEx(&config, f, args, nullptr), "cuLaunchKernelEx");
  check_cuda(d.cuCtxSynchronize(), "cuCtxSynchronize");
}

class TensorMapsRoundTrip : public TensorMapsGpu {
 protected:
  void SetUp() override {
    TensorMapsGpu::SetUp();
    if (IsSkipped()) return;
    if (device0_compute_capability() != 90) GTEST_SKIP() << "the round trips run sm_90a code (TMA)";
  }
};

// Loads boxes of k (BHND, odd length, head dim 72) at the start, across the head-dim end
// (columns 64..127 of 72) and across the sequence end, and compares them with the tensor.
TEST_F(TensorMapsRoundTrip, LoadedBoxesMatchTheTensorAndAreZeroPastTheEnds) {
  RoundTripKernels kernels;
  for (const Order order : {Order::bhnd, Order::bnhd}) {
    const Case c{"load", 2, 64, 203, 4, 3, 72, order, DType::bf16, 128, 128};
    SCOPED_TRACE(order == Order::bhnd ? "bhnd" : "bnhd");
    Tensors t(c);
    const FlashStrides& s = t.params.k_stride;
    std::vector<std::uint16_t> k(t.k.bytes() / 2);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = pattern(i);
    t.k.upload(k.data(), t.k.bytes());
    encode_tensor_maps(spec_of(c), t.params);

    const int rows = c.block_n;
    const unsigned bytes = 64u * rows * 2;
    DeviceBuffer box(bytes);
    std::vector<std::uint16_t> got(bytes / 2);
    for (const std::array<int, 4> at : {std::array<int, 4>{0, 0, 0, 0}, {64, 0, 2, 1}, {0, 128, 1, 1}, {64, 150, 2, 0}}) {
      SCOPED_TRACE(fmt::format("box at (column {}, row {}, head {}, batch {})", at[0], at[1], at[2], at[3]));
      box.fill_nan();
      run_box(kernels.load, t.params, kK, at, bytes, reinterpret_cast<CUdeviceptr>(box.data()));
      box.download(got.data(), bytes);
      int mismatches = 0;
      for (int r = 0; r < rows && mismatches < 8; ++r)
        for (int col = 0; col < 64 && mismatches < 8; ++col) {
          const int n = at[1] + r, d = at[0] + col;
          const bool inside = n < c.seqlen_k && d < c.head_dim;
          const std::uint16_t want = inside ? k[at[3] * s.batch + n * s.row + at[2] * s.head + d] : 0;
          const std::uint16_t have = got[swizzled_offset(r, col) / 2];
          if (have != want) {
            ++mismatches;
            ADD_FAILURE() << fmt::format("row {} column {}: got {:#06x}, expected {:#06x}", r, col, have, want);
          }
        }
    }
  }
}

// Stores 64-row boxes of o (BNHD, rows padded from 72 to 80 elements) across the head-dim
// end and the sequence end: the elements inside are written, the padding and the rows
// past the end keep their sentinel.
TEST_F(TensorMapsRoundTrip, StoredBoxesAreClippedAtTheEnds) {
  const Case c{"store", 2, 100, 100, 3, 3, 72, Order::bnhd, DType::f16, 128, 128};
  Tensors t(c);
  FlashAttentionParams& p = t.params;
  // Pad o's rows to 80 elements and give it room past its last row, to see what is written.
  p.o_stride = strides_of(Order::bnhd, c.seqlen_q, c.heads_q, 80);
  const std::size_t elements = span(c.batch, c.seqlen_q, c.heads_q, 80, p.o_stride) + 64 * p.o_stride.row;
  t.o = DeviceBuffer(2 * elements);
  p.o = t.o.data();
  constexpr std::uint16_t kSentinel = 0x7e7e;
  const std::vector<std::uint16_t> sentinel(elements, kSentinel);
  encode_tensor_maps(spec_of(c), p);

  RoundTripKernels kernels;
  const unsigned bytes = 64u * 64 * 2;
  std::vector<std::uint16_t> box(bytes / 2), got(elements);
  for (int r = 0; r < 64; ++r)
    for (int col = 0; col < 64; ++col) box[swizzled_offset(r, col) / 2] = pattern(r * 64 + col + 1);
  DeviceBuffer source(bytes);
  source.upload(box.data(), bytes);

  for (const std::array<int, 4> at : {std::array<int, 4>{64, 0, 1, 0}, {0, 64, 2, 1}, {64, 80, 0, 1}}) {
    SCOPED_TRACE(fmt::format("box at (column {}, row {}, head {}, batch {})", at[0], at[1], at[2], at[3]));
    t.o.upload(sentinel.data(), 2 * elements);
    run_box(kernels.store, p, kO, at, bytes, reinterpret_cast<CUdeviceptr>(source.data()));
    t.o.download(got.data(), 2 * elements);
    int mismatches = 0;
    for (std::size_t i = 0; i < elements && mismatches < 8; ++i) {
      // Which box element, if any, lands on offset i.
      const long long b = i / p.o_stride.batch, n = i % p.o_stride.batch / p.o_stride.row,
                      h = i % p.o_stride.row / p.o_stride.head, d = i % p.o_stride.head;
      const long long r = n - at[1], col = d - at[0];
      const bool written = b == at[3] && h == at[2] && n < c.seqlen_q && d < c.head_dim && r >= 0 && r < 64 &&
                           col >= 0 && col < 64;
      const std::uint16_t want = written ? box[swizzled_offset(r, col) / 2] : kSentinel;
      if (got[i] != want) {
        ++mismatches;
        ADD_FAILURE() << fmt::format("element {} (batch {}, row {}, head {}, column {}): got {:#06x}, expected {:#06x}",
                                     i, b, n, h, d, got[i], want);
      }
    }
  }
}

}  // namespace
}  // namespace flashgen
