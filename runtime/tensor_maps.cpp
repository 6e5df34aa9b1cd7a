#include "runtime/tensor_maps.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "compiler/kernel_pieces.h"
#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"

namespace flashgen {

static_assert(sizeof(FlashTensorMap) == sizeof(CUtensorMap), "FlashTensorMap must hold exactly one CUtensorMap");
// CUDA 13 declares CUtensorMap 128-byte aligned (12.x: 64); a descriptor in the parameter
// block needs 64 on sm_90. Maps are encoded into a local CUtensorMap and copied, so the
// driver always writes to its own type's alignment whichever FlashTensorMap has.
static_assert(alignof(FlashTensorMap) >= 64 && alignof(CUtensorMap) % alignof(FlashTensorMap) == 0,
              "FlashTensorMap must be aligned as the CUtensorMap it stands for (at least 64 bytes)");

namespace {

constexpr std::int64_t kElementBytes = 2;        // fp16/bf16
constexpr cuuint32_t kBoxColumns = 64;           // 128 bytes: the span of the 128-byte swizzle
constexpr cuuint32_t kOutputBoxRows = 64;        // o is stored one 64-row warpgroup tile at a time
constexpr std::int64_t kStrideMultiple = 16;     // bytes
constexpr std::int64_t kStrideLimit = std::int64_t{1} << 40;  // bytes, exclusive
constexpr std::int64_t kDimLimit = std::int64_t{1} << 32;     // inclusive
constexpr std::uintptr_t kAddressAlignment = 16;

// One of q, k, v, o as the parameter block describes it.
struct TensorView {
  const char* name;
  const void* address;
  FlashStrides stride;
  int batch;  // 1 for packed sequences: the descriptor spans the packed rows
  int seqlen;
  int heads;
  const char* seqlen_name;
  const char* heads_name;
  cuuint32_t box_rows;
  CUtensorMapL2promotion l2_promotion;
};

std::string needs_tma(const KernelSpec& spec) {
  return fmt::format("the warp-specialised kernel {} loads and stores through TMA and needs TMA-describable tensors",
                     spec.uri());
}

// (batch, seqlen, heads, head_dim) and their strides in elements, as the caller wrote them.
std::string shape_and_strides(const TensorView& t, int head_dim) {
  return fmt::format("shape (batch, {}, {}, head_dim) = ({}, {}, {}, {}), strides ({}, {}, {}, 1) elements", t.seqlen_name,
                     t.heads_name, t.batch, t.seqlen, t.heads, head_dim, t.stride.batch, t.stride.row, t.stride.head);
}

void check_dim(const KernelSpec& spec, const TensorView& t, int index, const char* dim, std::int64_t value) {
  if (value >= 1 && value <= kDimLimit) return;
  throw Error(Status::unsupported, fmt::format("{}: shape[{}] ({}) is {}, expected 1..2^32 for a TMA descriptor; {}",
                                               t.name, index, dim, value, needs_tma(spec)));
}

void check_stride(const KernelSpec& spec, const TensorView& t, int index, const char* dim, std::int64_t elements) {
  // Divide rather than multiply: a huge stride must not overflow on its way to the check.
  if (elements >= 0 && elements < kStrideLimit / kElementBytes && elements * kElementBytes % kStrideMultiple == 0)
    return;
  throw Error(Status::unsupported,
              fmt::format("{}: stride[{}] ({}) is {} elements, expected a multiple of {} elements ({} bytes) from 0 "
                          "to below 2^40 bytes for a TMA descriptor; {}",
                          t.name, index, dim, elements, kStrideMultiple / kElementBytes, kStrideMultiple,
                          needs_tma(spec)));
}

TensorMapLayout layout(const KernelSpec& spec, const FlashAttentionParams& p, const TensorView& t) {
  check_dim(spec, t, 0, "batch", t.batch);
  check_dim(spec, t, 1, t.seqlen_name, t.seqlen);
  check_dim(spec, t, 2, t.heads_name, t.heads);
  check_dim(spec, t, 3, "head_dim", p.head_dim);
  check_stride(spec, t, 0, "batch", t.stride.batch);
  check_stride(spec, t, 1, t.seqlen_name, t.stride.row);
  check_stride(spec, t, 2, t.heads_name, t.stride.head);
  if (reinterpret_cast<std::uintptr_t>(t.address) % kAddressAlignment != 0)
    throw Error(Status::unsupported,
                fmt::format("{}: data pointer {} is not {}-byte aligned, expected {}-byte alignment for a TMA "
                            "descriptor; {}",
                            t.name, fmt::ptr(t.address), kAddressAlignment, kAddressAlignment, needs_tma(spec)));

  TensorMapLayout m;
  m.tensor = t.name;
  m.address = t.address;
  m.dtype = spec.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  m.dims = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(t.seqlen), static_cast<cuuint64_t>(t.heads),
            static_cast<cuuint64_t>(t.batch)};
  m.strides = {static_cast<cuuint64_t>(t.stride.row * kElementBytes),
               static_cast<cuuint64_t>(t.stride.head * kElementBytes),
               static_cast<cuuint64_t>(t.stride.batch * kElementBytes)};
  m.box = {kBoxColumns, t.box_rows, 1, 1};
  m.l2_promotion = t.l2_promotion;
  return m;
}

// The forward's q, k, v, o; the dK/dV kernel's q, k, v, dout (in the order of `targets`).
std::array<TensorView, 4> views(const KernelSpec& spec, const FlashAttentionParams& p) {
  const auto block_m = static_cast<cuuint32_t>(spec.block_m), block_n = static_cast<cuuint32_t>(spec.block_n);
  // Packed sequences: one batch of all the packed rows (the kernels add each sequence's start).
  const bool packed = spec.varlen;
  const int batch = packed ? 1 : p.batch;
  const int rows_q = packed ? p.total_q : p.seqlen_q, rows_k = packed ? p.total_k : p.seqlen_k;
  const char* q_rows = packed ? "total_q" : "seqlen_q";
  const char* k_rows = packed ? "total_k" : "seqlen_k";
  // K and V tiles are re-read by every query tile of a head: promote larger L2 lines for them.
  const TensorView q{"q", p.q, p.q_stride, batch, rows_q, p.heads_q, q_rows, "heads_q", block_m,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_128B};
  const TensorView k{"k", p.k, p.k_stride, batch, rows_k, p.heads_kv, k_rows, "heads_kv", block_n,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  const TensorView v{"v", p.v, p.v_stride, batch, rows_k, p.heads_kv, k_rows, "heads_kv", block_n,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  if (spec.pass == Pass::bwd_dkdv)
    return {q, k, v,
            {"dout", p.dout, p.dout_stride, batch, rows_q, p.heads_q, q_rows, "heads_q", block_m,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B}};
  // A packed forward stores o without TMA (fwd_epilogue_sm90.cuh); its descriptor is encoded all the same.
  return {q, k, v,
          {"o", p.o, p.o_stride, batch, rows_q, p.heads_q, q_rows, "heads_q", kOutputBoxRows,
           CU_TENSOR_MAP_L2_PROMOTION_L2_128B}};
}

std::array<FlashTensorMap*, 4> targets(const KernelSpec& spec, FlashAttentionParams& p) {
  if (spec.pass == Pass::bwd_dkdv) return {&p.tma_q, &p.tma_k, &p.tma_v, &p.tma_do};
  return {&p.tma_q, &p.tma_k, &p.tma_v, &p.tma_o};
}

// The descriptors this thread encoded last, by layout: a CUtensorMap is a function of its
// layout alone (address, sizes, strides, box, swizzle, L2 promotion; not of the memory's
// contents), and a training step or a decode loop launches the same tensors again and again.
// A hit is one comparison per entry instead of a driver call (PyTorch's Inductor caches its
// host-side TMA descriptors the same way). Per thread: no lock on the launch path.
class DescriptorCache {
 public:
  const CUtensorMap* find(const TensorMapLayout& m) const {
    for (int i = 0; i < used_; ++i)
      if (same_descriptor(entries_[i].layout, m)) return &entries_[i].map;
    return nullptr;
  }
  void add(const TensorMapLayout& m, const CUtensorMap& map) {
    entries_[next_] = {m, map};
    next_ = (next_ + 1) % kEntries;
    if (used_ < kEntries) ++used_;
  }

 private:
  static constexpr int kEntries = 16;  // a few variants' q, k, v, o, dout and dQ accumulator
  struct Entry {
    TensorMapLayout layout;
    CUtensorMap map;
  };
  static bool same_descriptor(const TensorMapLayout& a, const TensorMapLayout& b) {
    return a.address == b.address && a.dtype == b.dtype && a.dims == b.dims && a.strides == b.strides &&
           a.box == b.box && a.l2_promotion == b.l2_promotion && a.swizzle == b.swizzle;
  }
  std::array<Entry, kEntries> entries_{};
  int used_ = 0, next_ = 0;
};

// `what` describes the tensor in an error (its name, shape and strides): formatted only then.
template <class What>
void encode(const CudaDriver& d, const KernelSpec& spec, const What& what, const TensorMapLayout& m,
            FlashTensorMap& out) {
  static thread_local DescriptorCache cache;
  if (const CUtensorMap* hit = cache.find(m)) {
    std::memcpy(&out, hit, sizeof *hit);
    return;
  }
  static constexpr cuuint32_t kElementStrides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = d.cuTensorMapEncodeTiled(&map, m.dtype, 4, const_cast<void*>(m.address), m.dims.data(),
                                              m.strides.data(), m.box.data(), kElementStrides,
                                              CU_TENSOR_MAP_INTERLEAVE_NONE, m.swizzle, m.l2_promotion,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_UNKNOWN";
    throw Error(Status::unsupported,
                fmt::format("{}: cuTensorMapEncodeTiled failed with {} ({}) for {}, box {}x{} (columns x rows); {}",
                            m.tensor, name, static_cast<int>(r), what(), m.box[0], m.box[1], needs_tma(spec)));
  }
  cache.add(m, map);
  std::memcpy(&out, &map, sizeof map);
}

}  // namespace

std::array<TensorMapLayout, 4> tensor_map_layouts(const KernelSpec& spec, const FlashAttentionParams& params) {
  const std::array<TensorView, 4> v = views(spec, params);
  return {layout(spec, params, v[0]), layout(spec, params, v[1]), layout(spec, params, v[2]),
          layout(spec, params, v[3])};
}

bool needs_dq_accum_map(const KernelSpec& spec) {
  return spec.warp_specialized() && spec.pass == Pass::bwd_dkdv && !spec.deterministic;
}

TensorMapLayout dq_accum_map_layout(const KernelSpec& spec, const FlashAttentionParams& params) {
  // The runtime's own workspace: 16-byte aligned (validated), rows of a 32-column multiple, in
  // planes (attention/offsets.cuh, accum_tma_coords): one per (batch, head), or, packed, one.
  const auto columns = static_cast<cuuint64_t>(spec.padded_head_dim());
  const auto rows = static_cast<cuuint64_t>(params.dq_accum_rows);
  const cuuint64_t plane_rows = spec.varlen ? rows : static_cast<cuuint64_t>(params.seqlen_q_rounded);
  const cuuint64_t planes = rows / std::max<cuuint64_t>(plane_rows, 1);
  const cuuint64_t row_bytes = columns * sizeof(float), plane_bytes = row_bytes * plane_rows;
  TensorMapLayout m;
  m.tensor = "dq_accum";
  m.address = params.dq_accum;
  m.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  m.dims = {columns, plane_rows, planes, 1};
  m.strides = {row_bytes, plane_bytes, plane_bytes * planes};
  // The boxes the kernels stage (bwd/dq_staging.cuh); a tile's rows past the plane are clipped.
  m.box = {kFlashDqBoxCols, static_cast<cuuint32_t>(flash_dq_box_rows(spec.block_m)), 1, 1};
  m.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return m;
}

void encode_tensor_maps(const KernelSpec& spec, FlashAttentionParams& params) {
  const std::array<TensorView, 4> v = views(spec, params);
  std::array<TensorMapLayout, 4> m;
  for (int i = 0; i < 4; ++i) m[i] = layout(spec, params, v[i]);  // every tensor checked before the driver is asked
  const CudaDriver& d = cuda_driver();
  const std::array<FlashTensorMap*, 4> out = targets(spec, params);
  for (int i = 0; i < 4; ++i) {
    const auto what = [&] {
      return fmt::format("{} of {}", shape_and_strides(v[i], params.head_dim), to_string(spec.dtype));
    };
    encode(d, spec, what, m[i], *out[i]);
  }
  if (needs_dq_accum_map(spec)) {
    const TensorMapLayout a = dq_accum_map_layout(spec, params);
    const auto what = [&] {
      return fmt::format("the fp32 dQ accumulator ({} rows of {} floats)", a.dims[1], a.dims[0]);
    };
    encode(d, spec, what, a, params.tma_dq_accum);
  }
}

}  // namespace flashgen
