// Backward dK/dV (FlashAttention-2). One CTA = one K/V tile (kBlockN keys) of one
// (batch, kv head); it loops over the query heads of its GQA group and over the Q
// tiles that can see its keys, and recomputes the transposed scores from lse:
//   S^T = K.Q^T, P^T = exp2(S^T * scale_log2 - lse * log2e), dV += P^T.dO,
//   dP^T = V.dO^T, dS^T = P^T * (dP^T - D) (times the softcap derivative),
//   dK += dS^T.Q, and (unless deterministic) dQ_accum += dS.K with fp32 atomics.
// dK (times softmax_scale) and dV are written once, summed over the group: no atomics.
// Warps split the keys (16-row slices) and, when there are more warps than slices,
// the head dim of the dK/dV accumulators. With kWgmma (sm_90a) every product is a
// wgmma: two warpgroups own 64 keys each (d <= 128) or, at d256, the same 64 keys and one
// half of the head dim each ("shared scores": warpgroup 0 computes S^T, warpgroup 1 dP^T,
// which it hands over through shared memory; warpgroup 0 turns them into P^T and dS^T,
// stored for both warpgroups' dV and dK products); Q/dO/K/V/dS^T are read from shared memory.
namespace flash {

// d256 on wgmma: both warpgroups on the same keys, one head-dim half each (KernelSpec::uses_wgmma).
constexpr bool kSharedScores = kWgmma && kHeadDimPadded == 256;

struct BwdDkdvLayout {
  using KV = KernelTile<kBlockN, kHeadDimCols>;
  using Q = KernelTile<kBlockM, kHeadDimCols>;  // Q and dO
  using DS = KernelTile<kBlockN, kBlockM>;      // dS^T (the dQ product; with shared scores dK's too), P^T
  // Q, dO, lse*log2e, D; wgmma tiles start 1024-byte aligned.
  static constexpr int kAlign = kWgmma ? 1024 : 16;
  static constexpr int kStageBytes = (2 * Q::kBytes + 2 * kBlockM * 4 + kAlign - 1) / kAlign * kAlign;
  // Shared scores: dS^T, P^T and warpgroup 1's dP^T fragments (fp32).
  static constexpr int kScoreBytes = kSharedScores ? 2 * DS::kBytes + kBlockN * kBlockM * 4
                                                   : (kDeterministic ? 0 : DS::kBytes);
  static constexpr int kBytes = 2 * KV::kBytes + kStages * kStageBytes + kScoreBytes;
};

// sm_90a products of one warpgroup (its 64 keys from key_row0): S^T = K.Q^T or dP^T =
// V.dO^T, both operands K-major. Issued, not fenced, committed or waited for.
template <int kMT>
__device__ __forceinline__ void wgmma_scores_t(float (&acc)[kMT][4], u32 s_kv, int key_row0, u32 s_qo) {
  using L = BwdDkdvLayout;
#pragma unroll
  for (int k = 0; k < kHeadDimPadded; k += 16)
    Wgmma<kMT * 8>::template ss<false, false>(acc, desc_k_major<L::KV>(s_kv, key_row0, k),
                                              desc_k_major<L::Q>(s_qo, 0, k), k > 0);
}

// acc += X^T.B with X^T (64 keys x the tile's queries: P^T or dS^T) K-major in shared memory
// and B (dO or Q) MN-major, the kDT * 8 head-dim columns from col0 (a multiple of 64).
template <int kDT, class XT = BwdDkdvLayout::DS, class QT = BwdDkdvLayout::Q>
__device__ __forceinline__ void wgmma_smem_t(float (&acc)[kDT][4], u32 s_x, u32 s_b, int col0) {
#pragma unroll
  for (int k = 0; k < kBlockM; k += 16)
    Wgmma<kDT * 8>::template ss<false, true>(acc, desc_k_major<XT>(s_x, 0, k),
                                             desc_mn_major<QT>(s_b + (col0 / 64) * QT::kBlockBytes, k), 1);
}

// Packed 16-bit fragments of this warp's keys x the tile's queries (c_to_a order) -> a [key][query]
// tile in shared memory (dS^T for the dQ product, P^T).
template <int kMT, class XT = BwdDkdvLayout::DS>
__device__ __forceinline__ void store_t(u32 s_x, const u32 (&a)[kMT / 2][4], int row0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      st_shared_u32(s_x + XT::elem(row0 + g + 8 * (r & 1), 16 * kk + 8 * (r >> 1) + 2 * tq), a[kk][r]);
}

// acc += X^T.B with X^T (this warp's keys x the tile's queries) in registers and B (Q or
// dO, [query][d], the warpgroup's head-dim columns from col0, a multiple of 64) MN-major in
// shared memory. Issued, not waited for.
template <int kMT, int kDT, class QT = BwdDkdvLayout::Q>  // QT a parameter: kBlockBytes exists on wgmma tiles only
__device__ __forceinline__ void wgmma_regs_t(float (&acc)[kDT][4], const u32 (&a)[kMT / 2][4], u32 s_b, int col0) {
#pragma unroll
  for (int kk = 0; kk < kMT / 2; ++kk)
    wgmma_rs_mn_major<QT>(acc, a[kk], s_b + (col0 / 64) * QT::kBlockBytes, 16 * kk);
}

// dQ (64 queries from q0, a multiple of 64, x kN head-dim columns from col0) = dS.K, with
// dS^T and K both stored [key][.]: MN-major A and B. Issued, not waited for.
template <int kN, class KV = BwdDkdvLayout::KV,
          class DS = BwdDkdvLayout::DS>  // parameters: kBlockBytes exists on wgmma tiles only
__device__ __forceinline__ void wgmma_dq(float (&acc)[kN / 8][4], u32 s_ds, u32 s_k, int q0, int col0) {
  const u32 s_ds_rows = s_ds + (q0 / 64) * DS::kBlockBytes;
  const u32 s_k_cols = s_k + (col0 / 64) * KV::kBlockBytes + (col0 % 64) * 2;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
    Wgmma<kN>::template ss<true, true>(acc, desc_mn_major<DS>(s_ds_rows, 16 * kk), desc_mn_major<KV>(s_k_cols, 16 * kk),
                                       kk > 0);
  wgmma_commit();
}

// dQ_accum[rows row0.., columns col0..] += acc (C fragments), with fp32 atomics. On sm_90a
// four columns at a time (red.global.add.v4.f32, a quarter of the atomic instructions): lanes
// tq and tq^1 swap half their fragment, so the even lane holds 4 consecutive columns of row g
// and the odd lane those of row g + 8.
template <int kRT, int kDT>
__device__ __forceinline__ void add_to_dq_accum(float* dq_acc, const float (&acc)[kRT][kDT][4], int row0, int col0,
                                                int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      const float* e = acc[mt][dt];
      if constexpr (kWgmma) {
        const bool odd = tq & 1;
        const float r0 = __shfl_xor_sync(0xffffffffu, odd ? e[0] : e[2], 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, odd ? e[1] : e[3], 1);
        float* dst = dq_acc + (row0 + 16 * mt + g + 8 * odd) * kHeadDimPadded + col0 + 8 * dt + 2 * (tq & ~1);
        red_add_v4(dst, odd ? r0 : e[0], odd ? r1 : e[1], odd ? e[2] : r0, odd ? e[3] : r1);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          atomicAdd(dq_acc + (row0 + 16 * mt + g + 8 * (i >> 1)) * kHeadDimPadded + col0 + 8 * dt + 2 * tq + (i & 1), e[i]);
      }
    }
}

__device__ __forceinline__ void bwd_dkdv_kernel(const FlashAttentionParams& p) {
  using L = BwdDkdvLayout;
  constexpr int kThreads = kWarps * 32;
  constexpr int kWarpsN = kWarps < kBlockN / 16 ? kWarps : kBlockN / 16;
  constexpr int kWarpsD = kWarps / kWarpsN;
  constexpr int kRT = kBlockN / (16 * kWarpsN);  // key slices per warp
  constexpr int kMT = kBlockM / 8;               // query n8 tiles of S^T
  constexpr int kDAcc = kHeadDimPadded / kWarpsD;
  constexpr int kDT = kDAcc / 8;
  // dQ = dS.K split: warps over 16-row query slices, then over the head dim.
  constexpr int kDqWarpsM = kWarps < kBlockM / 16 ? kWarps : kBlockM / 16;
  constexpr int kDqWarpsD = kWarps / kDqWarpsM;
  constexpr int kDqRT = kBlockM / (16 * kDqWarpsM);
  constexpr int kDqDT = kHeadDimPadded / kDqWarpsD / 8;

  const u32 s_k = smem_u32(dynamic_smem());
  const u32 s_v = s_k + L::KV::kBytes;
  const u32 s_stages = s_v + L::KV::kBytes;
  const u32 s_ds = s_stages + kStages * L::kStageBytes;
  const u32 s_pt = s_ds + L::DS::kBytes;       // shared scores only
  const u32 s_dpt = s_pt + L::DS::kBytes;      // shared scores only: warpgroup 1's dP^T fragments

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_n = warp % kWarpsN, warp_d = warp / kWarpsN;
  const int warp_row0 = warp_n * 16 * kRT;
  const int d0 = warp_d * kDAcc;
  const int n_block = blockIdx.x, h_kv = blockIdx.y, b = blockIdx.z;
  const int group = p.heads_q / p.heads_kv;
  const int n0 = n_block * kBlockN;
  const int rows_k = min(kBlockN, p.seqlen_k - n0);

  const u16* k = static_cast<const u16*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head + n0 * p.k_stride.row;
  const u16* v = static_cast<const u16*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head + n0 * p.v_stride.row;

  const Visibility vis(p);
  int q_lo, q_hi, m_begin, m_end;
  vis.query_range(n0, n0 + rows_k, q_lo, q_hi);
  tile_span<kBlockM>(q_lo, q_hi, m_begin, m_end);
  const int tiles_per_head = m_end - m_begin;
  const int total = group * tiles_per_head;

  load_tile<L::KV, kThreads>(s_k, k, p.k_stride.row, rows_k, tid);
  load_tile<L::KV, kThreads>(s_v, v, p.v_stride.row, rows_k, tid);
  cp_async_commit();

  // Work item t: query head h_kv * group + t / tiles_per_head, Q tile m_begin + t % tiles_per_head.
  auto load_stage = [&](int t, int stage) {
    const int h = h_kv * group + t / tiles_per_head;
    const int m0 = (m_begin + t % tiles_per_head) * kBlockM;
    const u32 dst = s_stages + stage * L::kStageBytes;
    const u16* q = static_cast<const u16*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head + m0 * p.q_stride.row;
    const u16* dout =
        static_cast<const u16*>(p.dout) + b * p.dout_stride.batch + h * p.dout_stride.head + m0 * p.dout_stride.row;
    load_tile<L::Q, kThreads>(dst, q, p.q_stride.row, p.seqlen_q - m0, tid);
    load_tile<L::Q, kThreads>(dst + L::Q::kBytes, dout, p.dout_stride.row, p.seqlen_q - m0, tid);
    const i64 row_base = (static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q_rounded + m0;
    for (int i = tid; i < kBlockM; i += kThreads) {
      const bool valid = m0 + i < p.seqlen_q;
      const float lse = valid ? p.lse[(static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q + m0 + i] : neg_inf();
      // Rows with no visible key (lse = -inf) and rows past seqlen_q get P = exp2(s - inf) = 0.
      st_shared_f32(dst + 2 * L::Q::kBytes + 4 * i, lse == neg_inf() ? pos_inf() : lse * kLog2e);
      st_shared_f32(dst + 2 * L::Q::kBytes + 4 * (kBlockM + i), valid ? p.dsum[row_base + i] : 0.0f);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < total) load_stage(s, s);
    cp_async_commit();
  }

  float acc_dk[kRT][kDT][4], acc_dv[kRT][kDT][4];
  zero(acc_dk);
  zero(acc_dv);
  const float softcap_pre = kSoftcap ? p.softmax_scale / p.softcap : 0.0f;

  // One barrier per Q tile: after it, stage t has landed and every warp is past tile t - 1,
  // whose stage (and the dS^T tile) may be refilled; one stage needs a second barrier.
  for (int t = 0; t < total; ++t) {
    if constexpr (kStages == 1) {
      load_stage(t, 0);
      cp_async_commit();
    }
    cp_async_wait<(kStages > 1 ? kStages - 2 : 0)>();
    if constexpr (kWgmma) fence_async_shared();
    __syncthreads();
    if constexpr (kStages > 1) {
      if (t + kStages - 1 < total) load_stage(t + kStages - 1, (t + kStages - 1) % kStages);
      cp_async_commit();
    }

    const int h = h_kv * group + t / tiles_per_head;
    const int m0 = (m_begin + t % tiles_per_head) * kBlockM;
    const u32 s_q = s_stages + (t % kStages) * L::kStageBytes;
    const u32 s_do = s_q + L::Q::kBytes;
    const u32 s_lse = s_do + L::Q::kBytes;
    const u32 s_dsum = s_lse + 4 * kBlockM;

    // With shared scores only warpgroup 0 does the element-wise work below.
    const bool elementwise = !kSharedScores || warp < 4;
    float s[kRT][kMT][4], dp[kRT][kMT][4];
    if constexpr (kSharedScores) {
      // Warpgroup 0: S^T; warpgroup 1: dP^T, handed over in fragment order (thread i of
      // warpgroup 1 -> thread i of warpgroup 0: the same fragment positions).
      const u32 dpt_slot = s_dpt + 16 * (tid % 128);
      // The same instructions in both warpgroups (one accumulator: S^T, or dP^T in warpgroup 1).
      wgmma_fence();
      wgmma_scores_t(s[0], elementwise ? s_k : s_v, 0, elementwise ? s_q : s_do);
      wgmma_commit();
      wgmma_wait<0>();
      if (!elementwise)
#pragma unroll
        for (int nt = 0; nt < kMT; ++nt)
          st_shared_v4(dpt_slot + 16 * 128 * nt,
                       make_uint4(__float_as_uint(s[0][nt][0]), __float_as_uint(s[0][nt][1]),
                                  __float_as_uint(s[0][nt][2]), __float_as_uint(s[0][nt][3])));
      __syncthreads();
      if (elementwise)
#pragma unroll
        for (int nt = 0; nt < kMT; ++nt) {
          const uint4 v = ld_shared_v4(dpt_slot + 16 * 128 * nt);
          dp[0][nt][0] = __uint_as_float(v.x), dp[0][nt][1] = __uint_as_float(v.y);
          dp[0][nt][2] = __uint_as_float(v.z), dp[0][nt][3] = __uint_as_float(v.w);
        }
    } else if constexpr (kWgmma) {
      wgmma_fence();
      wgmma_scores_t(s[0], s_k, warp_row0 & ~63, s_q);
      wgmma_scores_t(dp[0], s_v, warp_row0 & ~63, s_do);
      wgmma_commit();
      wgmma_wait<0>();
    } else {
      zero(s);
      mma_rows_nk<kRT, kMT, kHeadDimPadded, L::KV, L::Q>(s, s_k, warp_row0, s_q, 0, lane);
    }
    float dtanh[kRT][kMT][4];  // unused (and optimised away) without softcap
    if (elementwise) {
      if constexpr (kSoftcap) softcap_scores_and_slope(s, dtanh, softcap_pre, p.softcap);
      if (!vis.tile_visible(m0, min(m0 + kBlockM, p.seqlen_q), n0, n0 + kBlockN))
        mask_scores<false>(s, vis, n0 + warp_row0, m0, lane);
#pragma unroll
      for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kMT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = 8 * nt + 2 * (lane & 3) + (e & 1);
            s[mt][nt][e] = exp2_fast(fmaf(s[mt][nt][e], p.scale_log2, -ld_shared_f32(s_lse + 4 * col)));
          }
    }

    u32 a_p[kMT / 2][4];  // P^T as the A operand of the wgmma dV product
    if constexpr (kWgmma) {
      if (elementwise) {  // (warpgroup 1 of shared scores has no S^T: reading it would keep it live)
#pragma unroll
        for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kMT>(a_p[kk], s[0], kk);
        if (kSharedScores) store_t<kMT>(s_pt, a_p, warp_row0, lane);  // for both warpgroups' dV
      }
    } else {
      zero(dp);
      mma_rows_nk<kRT, kMT, kHeadDimPadded, L::KV, L::Q>(dp, s_v, warp_row0, s_do, 0, lane);
      mma_regs_kn<kRT, kMT, kDT, L::Q>(acc_dv, s, s_do, d0, lane);
    }
    if (elementwise)
#pragma unroll
      for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kMT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = 8 * nt + 2 * (lane & 3) + (e & 1);
            float ds = s[mt][nt][e] * (dp[mt][nt][e] - ld_shared_f32(s_dsum + 4 * col));
            if constexpr (kSoftcap) ds *= dtanh[mt][nt][e];
            dp[mt][nt][e] = ds;
          }
    if constexpr (kSharedScores) {
      // dS^T -> shared memory (warpgroup 0; P^T is there already), then both warpgroups' dV
      // and dK halves.
      if (elementwise) {
        u32 a_ds[kMT / 2][4];
#pragma unroll
        for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kMT>(a_ds[kk], dp[0], kk);
        store_t<kMT>(s_ds, a_ds, warp_row0, lane);
      }
      fence_async_shared();
      __syncthreads();
      wgmma_fence();
      wgmma_smem_t(acc_dv[0], s_pt, s_do, d0);
      wgmma_smem_t(acc_dk[0], s_ds, s_q, d0);
      wgmma_commit();  // (the dQ parts queue behind them)
    } else if constexpr (kWgmma) {
      u32 a_ds[kMT / 2][4];
#pragma unroll
      for (int kk = 0; kk < kMT / 2; ++kk) c_to_a<kMT>(a_ds[kk], dp[0], kk);
      if (!kDeterministic && warp_d == 0) store_t<kMT>(s_ds, a_ds, warp_row0, lane);  // for the dQ product
      wgmma_fence();
      wgmma_regs_t<kMT>(acc_dv[0], a_p, s_do, d0);
      wgmma_regs_t<kMT>(acc_dk[0], a_ds, s_q, d0);
      wgmma_commit();
      // Frees the P^T and dS^T fragments before the dQ accumulators go live.
      if constexpr (!kDeterministic) wgmma_wait<0>();
    } else {
      mma_regs_kn<kRT, kMT, kDT, L::Q>(acc_dk, dp, s_q, d0, lane);
    }

    if constexpr (!kDeterministic) {
      // dS^T -> shared memory (one copy: the warps of the first head-dim slice), then
      // dQ_accum[m0.., :] += dS.K, each warp a block of rows x head-dim columns.
      if (!kWgmma && warp_d == 0) {
        const int g = lane >> 2, tq = lane & 3;
#pragma unroll
        for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kMT; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
              st_shared_u32(s_ds + L::DS::elem(warp_row0 + 16 * mt + g + 8 * hh, 8 * nt + 2 * tq),
                            pack2(dp[mt][nt][2 * hh], dp[mt][nt][2 * hh + 1]));
      }
      if constexpr (!kSharedScores) {  // (shared scores: stored and synchronised above)
        if constexpr (kWgmma) fence_async_shared();
        __syncthreads();
      }
      const int dq_row0 = (warp % kDqWarpsM) * 16 * kDqRT;
      const int dq_d0 = (warp / kDqWarpsM) * (kHeadDimPadded / kDqWarpsD);
      float* dq_acc = p.dq_accum + ((static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q_rounded + m0) * kHeadDimPadded;
      if constexpr (kWgmma) {
        // dQ = dS.K in parts of 32 columns (16 accumulator registers next to dK and dV's).
        // 64-query tiles: warpgroup w takes the tile's queries and the columns from
        // w * kWgCols (d96: 64 and 32; the parts start 32-column aligned in K's blocks);
        // 128-query tiles (d64): warpgroup w takes queries 64w.. and every column, with the
        // parts double-buffered: part i + 1's product runs while part i's atomics issue
        // (+3-4 % at d64; at d96..d256 the same costs 15-17 %: docs/perf-notes.md).
        constexpr bool kSplitCols = kBlockM == 64;
        constexpr bool kDoubleBuffer = !kSplitCols;
        constexpr int kWgCols = kSplitCols ? (kHeadDimPadded / 2 + 31) / 32 * 32 : kHeadDimPadded;
        const int wg_q0 = kSplitCols ? 0 : 64 * (warp / 4);
        const int wg_col0 = kSplitCols ? (warp / 4) * kWgCols : 0;
        const int parts = (min(kHeadDimPadded, wg_col0 + kWgCols) - wg_col0) / 32;
        float acc_dq[2][1][4][4];
#pragma unroll
        for (int part = 0; part < kWgCols / 32; ++part) {
          if (part >= parts) break;
          const int buf = kDoubleBuffer ? part % 2 : 0;
          if (!kDoubleBuffer || part == 0) wgmma_dq<32>(acc_dq[buf][0], s_ds, s_k, wg_q0, wg_col0 + 32 * part);
          if (kDoubleBuffer && part + 1 < parts) {
            wgmma_dq<32>(acc_dq[1 - buf][0], s_ds, s_k, wg_q0, wg_col0 + 32 * (part + 1));
            wgmma_wait<1>();
          } else {
            wgmma_wait<0>();
          }
          add_to_dq_accum(dq_acc, acc_dq[buf], dq_row0, wg_col0 + 32 * part, lane);
        }
      } else {
        float acc_dq[kDqRT][kDqDT][4];
        zero(acc_dq);
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
          u32 a_ds[kDqRT][1][4];
#pragma unroll
          for (int mt = 0; mt < kDqRT; ++mt) load_a_trans<L::DS>(a_ds[mt][0], s_ds, dq_row0 + 16 * mt, 16 * kk, lane);
          mma_frags_kn<kDqRT, 1, kDqDT, L::KV>(acc_dq, a_ds, s_k, 16 * kk, dq_d0, lane);
        }
        add_to_dq_accum(dq_acc, acc_dq, dq_row0, dq_d0, lane);
      }
    }
    if constexpr (kWgmma) wgmma_wait<0>();  // the products read the stage until they complete
    if constexpr (kStages == 1) __syncthreads();  // the one stage is refilled by the next iteration
  }
  cp_async_wait<0>();  // the K/V copy is still in flight when no query sees these keys
  __syncthreads();

  // dK * scale and dV: registers -> the K and V tiles in shared memory -> global.
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mt + g + 8 * hh;
        const int col = d0 + 8 * dt + 2 * tq;
        st_shared_u32(s_k + L::KV::elem(row, col),
                      pack2(acc_dk[mt][dt][2 * hh] * p.softmax_scale, acc_dk[mt][dt][2 * hh + 1] * p.softmax_scale));
        st_shared_u32(s_v + L::KV::elem(row, col), pack2(acc_dv[mt][dt][2 * hh], acc_dv[mt][dt][2 * hh + 1]));
      }
  __syncthreads();
  u16* dk = static_cast<u16*>(p.dk) + b * p.dk_stride.batch + h_kv * p.dk_stride.head + n0 * p.dk_stride.row;
  u16* dv = static_cast<u16*>(p.dv) + b * p.dv_stride.batch + h_kv * p.dv_stride.head + n0 * p.dv_stride.row;
  store_tile<L::KV, kThreads>(dk, p.dk_stride.row, s_k, rows_k, tid);
  store_tile<L::KV, kThreads>(dv, p.dv_stride.row, s_v, rows_k, tid);
}

}  // namespace flash
