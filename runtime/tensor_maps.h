// TMA descriptors for the warp-specialised sm_90a kernels (KernelSpec::warp_specialized):
// q, k, v and o (forward) or dout (dK/dV) as rank-4 tiled tensor maps, (head_dim, seqlen, heads, batch) innermost
// first, read and written in boxes of 64 columns with the 128-byte swizzle. Boxes past the
// end are zero-filled on load and clipped on store, which the kernel relies on for ragged
// lengths and head dims that are not multiples of 64. Encoded at launch (launch plans are
// also built without a GPU); the layouts come from a pure function that tests check
// without a driver.
#pragma once

#include <cuda.h>

#include <array>

#include "compiler/kernel_spec.h"
#include "templates/params/attention_params.h"

namespace flashgen {

// One tensor map as cuTensorMapEncodeTiled takes it.
struct TensorMapLayout {
  const char* tensor = "";  // "q", "k", "v", "o" or "dout"
  const void* address = nullptr;
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  std::array<cuuint64_t, 4> dims{};     // head_dim, seqlen, heads, batch
  std::array<cuuint64_t, 3> strides{};  // bytes: row, head, batch
  std::array<cuuint32_t, 4> box{};      // 64 columns, rows (block_m for q/dout, block_n for k/v, 64 for o), 1, 1
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
};

// The maps of q, k, v, then o (forward) or dout (dK/dV) for `spec`, from the pointers, sizes and strides in
// `params`. Throws Error(unsupported) naming the tensor when TMA cannot describe it: a
// stride that is negative, not a multiple of 8 elements (16 bytes) or not below 2^40 bytes,
// a size outside 1..2^32, a pointer that is not 16-byte aligned.
std::array<TensorMapLayout, 4> tensor_map_layouts(const KernelSpec& spec, const FlashAttentionParams& params);

// The dQ accumulator's map for the warp-specialised dK/dV kernel that is not deterministic:
// fp32 (head_dim_padded, rows per plane, planes, 1), a plane per (batch, head) or, packed,
// one; 128-byte swizzled boxes of kFlashDqBoxCols x flash_dq_box_rows(block_m) (the
// staged boxes; columns past the row and rows past the plane are clipped).
TensorMapLayout dq_accum_map_layout(const KernelSpec& spec, const FlashAttentionParams& params);

// Whether `spec` reduces into the dQ accumulator through params.tma_dq_accum.
bool needs_dq_accum_map(const KernelSpec& spec);

// Fills params.tma_q/k/v and tma_o (forward) or tma_do (dK/dV), and tma_dq_accum where
// needs_dq_accum_map, from params' own pointers, sizes and strides: host work only (no
// device memory, no allocation), once per launch. Throws Error(unsupported) as
// tensor_map_layouts does, or naming the tensor, its shape and strides and the driver's
// CUresult when cuTensorMapEncodeTiled rejects a map.
void encode_tensor_maps(const KernelSpec& spec, FlashAttentionParams& params);

}  // namespace flashgen
