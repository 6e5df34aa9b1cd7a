// Forward pass (the seed's ledger algorithm). One CTA = one Q tile of one (batch, head).
// Loop over the K/V tiles the tile can see: S = Q.K^T on tensor cores, mask only
// boundary / diagonal tiles, online softmax with m, l in registers, P rounded to 16
// bits in registers and used directly as the A operand of O += P.V. O is written once
// (through shared memory, 16-byte stores) with lse = m + log(l) per row.
// Tensor cores: mma.sync (sm_80+, warps own 16-row slices) or, with kWgmma (sm_90a),
// wgmma with Q, K and V read straight from shared memory (a warpgroup owns 64 rows).
namespace flash {

struct FwdLayout {
  using Q = KernelTile<kBlockM, kHeadDimCols>;
  using KV = KernelTile<kBlockN, kHeadDimCols>;
  static constexpr int kStageBytes = 2 * KV::kBytes;  // K then V
  static constexpr int kBytes = Q::kBytes + kStages * kStageBytes;
};

// The two products on sm_90a, each one wgmma group that the warpgroup waits for.
// S (64 x kBlockN) = Q rows q_row0.. . K^T, both K-major in shared memory.
template <int kNT>
__device__ __forceinline__ void wgmma_scores(float (&s)[kNT][4], u32 s_q, int q_row0, u32 s_k) {
  using L = FwdLayout;
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < kHeadDimPadded; k += 16)
    Wgmma<kNT * 8>::template ss<false, false>(s, desc_k_major<L::Q>(s_q, q_row0, k), desc_k_major<L::KV>(s_k, 0, k), k > 0);
  wgmma_commit();
  wgmma_wait<0>();
}

// O += P.V with P in registers (rounded to 16 bits here) and V MN-major in shared memory.
template <int kNT, int kDT>
__device__ __forceinline__ void wgmma_p_v(float (&o)[kDT][4], const float (&p)[kNT][4], u32 s_v) {
  using L = FwdLayout;
  u32 a[kNT / 2][4];
#pragma unroll
  for (int kk = 0; kk < kNT / 2; ++kk) c_to_a<kNT>(a[kk], p, kk);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kNT / 2; ++kk) wgmma_rs_mn_major<L::KV>(o, a[kk], s_v, 16 * kk);
  wgmma_commit();
  wgmma_wait<0>();
}

__device__ __forceinline__ void fwd_kernel(const FlashAttentionParams& p) {
  using L = FwdLayout;
  constexpr int kThreads = kWarps * 32;
  constexpr int kRT = kBlockM / (16 * kWarps);  // 16-row slices per warp
  constexpr int kNT = kBlockN / 8;
  constexpr int kDT = kHeadDimPadded / 8;

  const u32 s_q = smem_u32(dynamic_smem());
  const u32 s_kv = s_q + L::Q::kBytes;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Heavier (later, under a causal mask) query tiles first.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int h_kv = h / (p.heads_q / p.heads_kv);
  const int m0 = m_block * kBlockM;
  const int rows_q = min(kBlockM, p.seqlen_q - m0);
  const int warp_row0 = warp * 16 * kRT;  // within the tile
  static_assert(!kWgmma || kRT == 1, "wgmma: 4 warps (a warpgroup) per 64 query rows");

  const u16* q = static_cast<const u16*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head + m0 * p.q_stride.row;
  const u16* k = static_cast<const u16*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const u16* v = static_cast<const u16*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;
  u16* o = static_cast<u16*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head + m0 * p.o_stride.row;

  const Visibility vis(p);
  int key_lo, key_hi, n_begin, n_end;
  vis.key_range(m0, m0 + rows_q, key_lo, key_hi);
  tile_span<kBlockN>(key_lo, key_hi, n_begin, n_end);

  float acc_o[kRT][kDT][4];
  zero(acc_o);
  SoftmaxLedger<kRT> ledger;
  ledger.init();

  auto load_kv = [&](int n_block, int stage) {
    const int n0 = n_block * kBlockN;
    const u32 dst = s_kv + stage * L::kStageBytes;
    load_tile<L::KV, kThreads>(dst, k + n0 * p.k_stride.row, p.k_stride.row, p.seqlen_k - n0, tid);
    load_tile<L::KV, kThreads>(dst + L::KV::kBytes, v + n0 * p.v_stride.row, p.v_stride.row, p.seqlen_k - n0,
                               tid);
  };

  load_tile<L::Q, kThreads>(s_q, q, p.q_stride.row, rows_q, tid);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s);
    cp_async_commit();
  }

  // One barrier per K/V tile: after it, stage it has landed and every warp is past tile
  // it - 1 (its products waited for), whose stage may be refilled; one stage needs a second.
  const float softcap_pre = kSoftcap ? p.softmax_scale / p.softcap : 0.0f;
  for (int n_block = n_begin; n_block < n_end; ++n_block) {
    const int it = n_block - n_begin;
    if constexpr (kStages == 1) {
      load_kv(n_block, 0);
      cp_async_commit();
    }
    cp_async_wait<(kStages > 1 ? kStages - 2 : 0)>();
    if constexpr (kWgmma) fence_async_shared();
    __syncthreads();
    if constexpr (kStages > 1) {
      const int ahead = n_block + kStages - 1;
      if (ahead < n_end) load_kv(ahead, (it + kStages - 1) % kStages);
      cp_async_commit();
    }

    const u32 s_k = s_kv + (it % kStages) * L::kStageBytes;
    const u32 s_v = s_k + L::KV::kBytes;
    const int n0 = n_block * kBlockN;

    float s[kRT][kNT][4];
    if constexpr (kWgmma) {
      wgmma_scores(s[0], s_q, warp_row0 & ~63, s_k);
    } else {
      zero(s);
      mma_rows_nk<kRT, kNT, kHeadDimPadded, L::Q, L::KV>(s, s_q, warp_row0, s_k, 0, lane);
    }
    if constexpr (kSoftcap) softcap_scores(s, softcap_pre, p.softcap);
    if (!vis.tile_visible(m0, m0 + rows_q, n0, n0 + kBlockN)) mask_scores<true>(s, vis, m0 + warp_row0, n0, lane);
    ledger.update(s, acc_o, p.scale_log2);
    if constexpr (kWgmma)
      wgmma_p_v(acc_o[0], s[0], s_v);
    else
      mma_regs_kn<kRT, kNT, kDT, L::KV>(acc_o, s, s_v, 0, lane);
    if constexpr (kStages == 1) __syncthreads();  // the one stage is refilled by the next iteration
  }

  cp_async_wait<0>();  // the Q copy is still in flight when the tile sees no key
  __syncthreads();  // (and, with wgmma, every warpgroup is done reading Q before O overwrites it)

  float lse[kRT][2];
  ledger.finish(acc_o, p.scale_log2, lse);

  // O: registers -> this warp's rows of the Q tile in shared memory -> global.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mt + g + 8 * hh;
        st_shared_u32(s_q + L::Q::elem(row, 8 * dt + 2 * t), pack2(acc_o[mt][dt][2 * hh], acc_o[mt][dt][2 * hh + 1]));
      }
  if (p.lse != nullptr && t == 0) {
    float* lse_row = p.lse + (static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q + m0;
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mt + g + 8 * hh;
        if (row < rows_q) lse_row[row] = lse[mt][hh];
      }
  }
  __syncthreads();
  store_tile<L::Q, kThreads>(o, p.o_stride.row, s_q, rows_q, tid);
}

}  // namespace flash
