// Backward dQ without atomics (the deterministic path). One CTA = one Q tile of one
// (batch, head); loop over the K/V tiles it sees, recompute P from lse,
// dP = dO.V^T, dS = P * (dP - D) (times the softcap derivative), dQ += dS.K with dS
// reused from registers. dq = dQ * softmax_scale is written once.
namespace flash {

struct BwdDqLayout {
  using Q = SmemTile<kBlockM, kHeadDimPadded>;  // Q and dO
  using KV = SmemTile<kBlockN, kHeadDimPadded>;
  static constexpr int kStageBytes = 2 * KV::kBytes;
  static constexpr int kBytes = 2 * Q::kBytes + kStages * kStageBytes;
};

__device__ __forceinline__ void bwd_dq_kernel(const FlashAttentionParams& p) {
  using L = BwdDqLayout;
  constexpr int kThreads = kWarps * 32;
  constexpr int kRT = kBlockM / (16 * kWarps);
  constexpr int kNT = kBlockN / 8;
  constexpr int kDT = kHeadDimPadded / 8;

  const u32 s_q = smem_u32(dynamic_smem());
  const u32 s_do = s_q + L::Q::kBytes;
  const u32 s_kv = s_do + L::Q::kBytes;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int h_kv = h / (p.heads_q / p.heads_kv);
  const int m0 = m_block * kBlockM;
  const int rows_q = min(kBlockM, p.seqlen_q - m0);
  const int warp_row0 = warp * 16 * kRT;

  const u16* q = static_cast<const u16*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head + m0 * p.q_stride.row;
  const u16* dout =
      static_cast<const u16*>(p.dout) + b * p.dout_stride.batch + h * p.dout_stride.head + m0 * p.dout_stride.row;
  const u16* k = static_cast<const u16*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const u16* v = static_cast<const u16*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;

  const Visibility vis(p);
  int key_lo, key_hi, n_begin, n_end;
  vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
  tile_span<kBlockN>(key_lo, key_hi, n_begin, n_end);

  // Per-row lse * log2e (+inf for empty rows and rows past seqlen_q: P = 0) and D.
  float lse_log2[kRT][2], dsum[kRT][2];
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = warp_row0 + 16 * mt + g + 8 * hh;
      const bool valid = row < rows_q;
      const i64 bh = static_cast<i64>(b) * p.heads_q + h;
      const float lse = valid ? p.lse[bh * p.seqlen_q + m0 + row] : neg_inf();
      lse_log2[mt][hh] = lse == neg_inf() ? pos_inf() : lse * kLog2e;
      dsum[mt][hh] = valid ? p.dsum[bh * p.seqlen_q_rounded + m0 + row] : 0.0f;
    }

  auto load_kv = [&](int n_block, int stage) {
    const int n0 = n_block * kBlockN;
    const u32 dst = s_kv + stage * L::kStageBytes;
    load_tile<L::KV, kThreads>(dst, k + n0 * p.k_stride.row, p.k_stride.row, p.seqlen_k - n0, tid);
    load_tile<L::KV, kThreads>(dst + L::KV::kBytes, v + n0 * p.v_stride.row, p.v_stride.row, p.seqlen_k - n0,
                               tid);
  };
  load_tile<L::Q, kThreads>(s_q, q, p.q_stride.row, rows_q, tid);
  load_tile<L::Q, kThreads>(s_do, dout, p.dout_stride.row, rows_q, tid);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s);
    cp_async_commit();
  }

  float acc_dq[kRT][kDT][4];
  zero(acc_dq);
  const float softcap_pre = kSoftcap ? p.softmax_scale / p.softcap : 0.0f;

  for (int n_block = n_begin; n_block < n_end; ++n_block) {
    const int it = n_block - n_begin;
    const int ahead = n_block + kStages - 1;
    if (ahead < n_end) load_kv(ahead, (it + kStages - 1) % kStages);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();

    const u32 s_k = s_kv + (it % kStages) * L::kStageBytes;
    const u32 s_v = s_k + L::KV::kBytes;
    const int n0 = n_block * kBlockN;

    float s[kRT][kNT][4];
    zero(s);
    mma_rows_nk<kRT, kNT, kHeadDimPadded, L::Q, L::KV>(s, s_q, warp_row0, s_k, 0, lane);
    float dtanh[kRT][kNT][4];  // unused (and optimised away) without softcap
    if constexpr (kSoftcap) softcap_scores_and_slope(s, dtanh, softcap_pre, p.softcap);
    if (!vis.tile_visible(m0, m0 + rows_q, n0, n0 + kBlockN)) mask_scores<true>(s, vis, m0 + warp_row0, n0, lane);

    float dp[kRT][kNT][4];
    zero(dp);
    mma_rows_nk<kRT, kNT, kHeadDimPadded, L::Q, L::KV>(dp, s_do, warp_row0, s_v, 0, lane);
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int hh = e >> 1;
          const float pr = exp2_fast(fmaf(s[mt][nt][e], p.scale_log2, -lse_log2[mt][hh]));
          float ds = pr * (dp[mt][nt][e] - dsum[mt][hh]);
          if constexpr (kSoftcap) ds *= dtanh[mt][nt][e];
          dp[mt][nt][e] = ds;
        }
    mma_regs_kn<kRT, kNT, kDT, L::KV>(acc_dq, dp, s_k, 0, lane);
    __syncthreads();
  }
  cp_async_wait<0>();
  __syncthreads();

#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mt + g + 8 * hh;
        st_shared_u32(s_q + L::Q::elem(row, 8 * dt + 2 * tq),
                      pack2(acc_dq[mt][dt][2 * hh] * p.softmax_scale, acc_dq[mt][dt][2 * hh + 1] * p.softmax_scale));
      }
  __syncthreads();
  u16* dq = static_cast<u16*>(p.dq) + b * p.dq_stride.batch + h * p.dq_stride.head + m0 * p.dq_stride.row;
  store_tile<L::Q, kThreads>(dq, p.dq_stride.row, s_q, rows_q, tid);
}

}  // namespace flash
