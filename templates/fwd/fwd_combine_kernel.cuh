// The split-KV combine: the num_splits parts of each query row that fwd_splitkv wrote
// (o_partial, lse_partial; params/attention_params.h) merged by lse into O (the input
// dtype) and lse. A CTA merges kBlockM rows of lse's row order ((batch, heads_q, seqlen_q), or
// (heads_q, total_q) for queries packed over a KV cache, kVarlen),
// one at a time with all its threads: the combine reads little (the parts of a few hundred
// rows) and is bound by load latency, so each row's loads are issued at once: one lse per
// thread, then thread (group g, chunk c) sums the parts s = g, g + kGroups, ... of its 8
// columns, and the groups' sums are added in group order. The order is fixed, so a fixed
// split count is bitwise stable. Launched with PDL behind fwd_splitkv on sm_90.
#pragma once

#include "arch/grid_dependency.cuh"
#include "attention/lse_merge.cuh"
#include "attention/offsets.cuh"
#include "kv_cache/kv_cache_offsets.cuh"
#include "params/kernel_traits.cuh"
#include "tile/copy.cuh"

namespace flash {

template <class Cfg>
struct FwdCombineKernel {
  static constexpr int kChunks = Cfg::kHeadDimPadded / 8;  // 8 columns each
  static constexpr int kGroups = Cfg::kThreads / kChunks;   // split groups per row
  static_assert(kGroups >= 1 && Cfg::kThreads <= kFlashMaxSplits, "a thread per chunk; the lse loads in one pass");
  // Shared memory: the row's part weights, its merged lse (16 bytes, keeping the sums 16-byte
  // aligned), then each group's 8-column sums.
  static constexpr int kSharedBytes = kFlashMaxSplits * 4 + 16 + kGroups * Cfg::kHeadDimPadded * 4;

  static __device__ __forceinline__ void run(const FlashAttentionParams& p) {
    const int tid = threadIdx.x, lane = tid & 31, splits = p.num_splits;
    const i64 rows_all = Select<Cfg::kVarlen, PackedQueryRows, DenseRows>::type::lse_rows(p);
    const u32 s_weight = smem_u32(dynamic_smem());
    const u32 s_merged = s_weight + kFlashMaxSplits * 4;
    const u32 s_sum = s_merged + 16;
    const int g = tid / kChunks, c = tid % kChunks;

    // Packed: only rows [cu_seqlens_q[0], cu_seqlens_q[batch]) belong to a sequence; the parts
    // of the others were never written, and their o and lse stay the caller's.
    int first = 0, end = 0;
    if constexpr (Cfg::kVarlen) {
      first = min(max(p.cu_seqlens_q[0], 0), p.total_q);
      end = min(max(p.cu_seqlens_q[p.batch], first), p.total_q);
    }
    grid_dependency_wait();
    for (int r = 0; r < Cfg::kBlockM; ++r) {
      const i64 row = static_cast<i64>(blockIdx.x) * Cfg::kBlockM + r;
      if (row >= rows_all) break;
      if constexpr (Cfg::kVarlen) {  // the row is the CTA's: every thread skips it
        const int packed = static_cast<int>(row % p.total_q);
        if (packed < first || packed >= end) continue;
      }
      // The parts' lse: thread s loads part s; warp 0 merges them, then each thread turns its
      // part's lse into its weight.
      for (int s = tid; s < splits; s += Cfg::kThreads) st_shared_f32(s_weight + 4 * s, p.lse_partial[s * rows_all + row]);
      __syncthreads();
      if (tid < 32) {
        LseMerge m;
        for (int s = lane; s < splits; s += 32) m.add(ld_shared_f32(s_weight + 4 * s));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m.merge(m.shuffled_xor(off));
        if (lane == 0) {
          st_shared_f32(s_merged, m.lse());
          if (p.lse != nullptr) p.lse[row] = m.lse();
        }
      }
      __syncthreads();
      const float merged = ld_shared_f32(s_merged);
      for (int s = tid; s < splits; s += Cfg::kThreads)
        st_shared_f32(s_weight + 4 * s, LseMerge::weight(ld_shared_f32(s_weight + 4 * s), merged));
      __syncthreads();

      float o[8] = {};
      if (g < kGroups) {
        const float* part = p.o_partial + row * Cfg::kHeadDimPadded + 8 * c;
#pragma unroll 4
        for (int s = g; s < splits; s += kGroups) {
          const float wt = ld_shared_f32(s_weight + 4 * s);
          const float4* src = reinterpret_cast<const float4*>(part + s * rows_all * Cfg::kHeadDimPadded);
          const float4 lo = src[0], hi = src[1];
          const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int e = 0; e < 8; ++e) o[e] += wt * x[e];
        }
        const u32 dst = s_sum + 4 * (g * Cfg::kHeadDimPadded + 8 * c);
        st_shared_v4(dst, make_uint4(__float_as_uint(o[0]), __float_as_uint(o[1]), __float_as_uint(o[2]),
                                     __float_as_uint(o[3])));
        st_shared_v4(dst + 16, make_uint4(__float_as_uint(o[4]), __float_as_uint(o[5]), __float_as_uint(o[6]),
                                          __float_as_uint(o[7])));
      }
      __syncthreads();
      if (tid < kChunks && c * 8 < Cfg::kHeadDim) {
        float sum[8] = {};
        for (int gg = 0; gg < kGroups; ++gg)
#pragma unroll
          for (int e = 0; e < 8; ++e) sum[e] += ld_shared_f32(s_sum + 4 * (gg * Cfg::kHeadDimPadded + 8 * c + e));
        if constexpr (Cfg::kVarlen) {  // row order (heads_q, total_q): packed row `packed` of head h
          const int packed = static_cast<int>(row % p.total_q), h = static_cast<int>(row / p.total_q);
          u16* o = static_cast<u16*>(p.o) + h * p.o_stride.head + static_cast<i64>(packed) * p.o_stride.row;
          store_row_chunk<typename Cfg::Element, Cfg::kHeadDim, Cfg::kVecLoad>(o, c, sum);
        } else {  // row order (batch, heads_q, seqlen_q), as lse
          const int pos = static_cast<int>(row % p.seqlen_q);
          const int h = static_cast<int>(row / p.seqlen_q % p.heads_q);
          const int b = static_cast<int>(row / (static_cast<i64>(p.seqlen_q) * p.heads_q));
          store_row_chunk<typename Cfg::Element, Cfg::kHeadDim, Cfg::kVecLoad>(DenseOffsets(p, b).o(h, pos), c, sum);
        }
      }
      __syncthreads();  // the next row reuses the weights and sums
    }
  }
};

}  // namespace flash
