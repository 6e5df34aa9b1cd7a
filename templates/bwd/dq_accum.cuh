// dQ of the atomic backward path, per (K/V tile, Q tile): dQ_accum[m0.., :] += dS.K * 1 in
// fp32 (the scale is applied by bwd_dq_convert), with dS^T already in shared memory (s_ds,
// behind a barrier). mma.sync: each warp a block of query rows x head-dim columns;
// wgmma: in parts of 32 columns, four-column vector atomics.
#pragma once

#include "arch/atomics.cuh"
#include "arch/wgmma_sm90.cuh"
#include "attention/offsets.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

// dQ_accum[rows row0.., columns col0..] += acc (C fragments), with fp32 atomics. kVec4 (sm_90a):
// four columns at a time (red.global.add.v4.f32, a quarter of the atomic instructions): lanes
// tq and tq^1 swap half their fragment, so the even lane holds 4 consecutive columns of row g
// and the odd lane those of row g + 8. kRowElems: the accumulator's row length.
template <bool kVec4, int kRowElems, int kRT, int kDT>
__device__ __forceinline__ void add_to_dq_accum(float* dq_acc, const float (&acc)[kRT][kDT][4], int row0, int col0,
                                                int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      const float* e = acc[mt][dt];
      if constexpr (kVec4) {
        const bool odd = tq & 1;
        const float r0 = __shfl_xor_sync(0xffffffffu, odd ? e[0] : e[2], 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, odd ? e[1] : e[3], 1);
        float* dst = dq_acc + (row0 + 16 * mt + g + 8 * odd) * kRowElems + col0 + 8 * dt + 2 * (tq & ~1);
        red_add_v4(dst, odd ? r0 : e[0], odd ? r1 : e[1], odd ? e[2] : r0, odd ? e[3] : r1);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          atomicAdd(dq_acc + (row0 + 16 * mt + g + 8 * (i >> 1)) * kRowElems + col0 + 8 * dt + 2 * tq + (i & 1), e[i]);
      }
    }
}

// The dQ product's warp split: warps over 16-row query slices, then over the head dim.
template <class Cfg>
struct DqWarpSplit {
  static constexpr int kWarpsM = Cfg::kWarps < Cfg::kBlockM / 16 ? Cfg::kWarps : Cfg::kBlockM / 16;
  static constexpr int kWarpsD = Cfg::kWarps / kWarpsM;
  static constexpr int kRT = Cfg::kBlockM / (16 * kWarpsM);
  static constexpr int kDT = Cfg::kHeadDimPadded / kWarpsD / 8;
};

// mma.sync: dQ = dS.K, dS^T and K both [key][.] in shared memory.
template <class Cfg, class L>
struct DqAccumSm80 {
  static __device__ __forceinline__ void accumulate(float* dq_acc, const L& l, int warp, int lane) {
    using S = DqWarpSplit<Cfg>;
    const int dq_row0 = (warp % S::kWarpsM) * 16 * S::kRT;
    const int dq_d0 = (warp / S::kWarpsM) * (Cfg::kHeadDimPadded / S::kWarpsD);
    float acc_dq[S::kRT][S::kDT][4];
    zero(acc_dq);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
      u32 a_ds[S::kRT][1][4];
#pragma unroll
      for (int mt = 0; mt < S::kRT; ++mt) load_a_trans<typename L::DS>(a_ds[mt][0], l.s_ds, dq_row0 + 16 * mt, 16 * kk, lane);
      mma_frags_kn<Cfg::kIsBf16, S::kRT, 1, S::kDT, typename L::KV>(acc_dq, a_ds, l.s_k, 16 * kk, dq_d0, lane);
    }
    add_to_dq_accum<false, Cfg::kHeadDimPadded>(dq_acc, acc_dq, dq_row0, dq_d0, lane);
  }
};

// wgmma: dQ (64 queries from q0, a multiple of 64, x kN head-dim columns from col0) = dS.K,
// with dS^T and K both stored [key][.]: MN-major A and B. Issued, not waited for.
template <class Cfg, class L, int kN>
__device__ __forceinline__ void wgmma_dq(float (&acc)[kN / 8][4], u32 s_ds, u32 s_k, int q0, int col0) {
  using KV = typename L::KV;
  using DS = typename L::DS;
  const u32 s_ds_rows = s_ds + (q0 / 64) * DS::kBlockBytes;
  const u32 s_k_cols = s_k + (col0 / 64) * KV::kBlockBytes + (col0 % 64) * 2;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
    Wgmma<kN, Cfg::kIsBf16>::template ss<true, true>(acc, desc_mn_major<DS>(s_ds_rows, 16 * kk),
                                                     desc_mn_major<KV>(s_k_cols, 16 * kk), kk > 0);
  wgmma_commit();
}

// wgmma: dQ = dS.K in parts of 32 columns (16 accumulator registers next to dK and dV's).
// 64-query tiles: warpgroup w takes the tile's queries and the columns from w * kWgCols
// (d96: 64 and 32; the parts start 32-column aligned in K's blocks); 128-query tiles (d64):
// warpgroup w takes queries 64w.. and every column, with the parts double-buffered: part
// i + 1's product runs while part i's atomics issue (+3-4 % at d64; at d96..d256 the same
// costs 15-17 %: docs/perf-notes.md). Waits for every wgmma group issued before it too.
template <class Cfg, class L>
struct DqAccumSm90 {
  static __device__ __forceinline__ void accumulate(float* dq_acc, const L& l, int warp, int lane) {
    using S = DqWarpSplit<Cfg>;
    constexpr int kD = Cfg::kHeadDimPadded;
    constexpr bool kSplitCols = Cfg::kBlockM == 64;
    constexpr bool kDoubleBuffer = !kSplitCols;
    constexpr int kWgCols = kSplitCols ? (kD / 2 + 31) / 32 * 32 : kD;
    const int dq_row0 = (warp % S::kWarpsM) * 16 * S::kRT;
    const int wg_q0 = kSplitCols ? 0 : 64 * (warp / 4);
    const int wg_col0 = kSplitCols ? (warp / 4) * kWgCols : 0;
    const int parts = (min(kD, wg_col0 + kWgCols) - wg_col0) / 32;
    float acc_dq[2][1][4][4];
#pragma unroll
    for (int part = 0; part < kWgCols / 32; ++part) {
      if (part >= parts) break;
      const int buf = kDoubleBuffer ? part % 2 : 0;
      if (!kDoubleBuffer || part == 0) wgmma_dq<Cfg, L, 32>(acc_dq[buf][0], l.s_ds, l.s_k, wg_q0, wg_col0 + 32 * part);
      if (kDoubleBuffer && part + 1 < parts) {
        wgmma_dq<Cfg, L, 32>(acc_dq[1 - buf][0], l.s_ds, l.s_k, wg_q0, wg_col0 + 32 * (part + 1));
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      add_to_dq_accum<true, kD>(dq_acc, acc_dq[buf], dq_row0, wg_col0 + 32 * part, lane);
    }
  }
};

}  // namespace flash
