// Forward pass (the seed's ledger algorithm). One CTA = one Q tile of one (batch, head).
// Loop over the K/V tiles the tile can see: S = Q.K^T on tensor cores, mask only
// boundary / diagonal tiles, online softmax with m, l in registers, P rounded to 16
// bits in registers and used directly as the A operand of O += P.V. O is written once
// (through shared memory, 16-byte stores) with lse = m + log(l) per row.
namespace flash {

struct FwdLayout {
  using Q = SmemTile<kBlockM, kHeadDimPadded>;
  using KV = SmemTile<kBlockN, kHeadDimPadded>;
  static constexpr int kStageBytes = 2 * KV::kBytes;  // K then V
  static constexpr int kBytes = Q::kBytes + kStages * kStageBytes;
};

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
    if constexpr (kSoftcap) softcap_scores(s, softcap_pre, p.softcap);
    if (!vis.tile_visible(m0, m0 + rows_q, n0, n0 + kBlockN)) mask_scores<true>(s, vis, m0 + warp_row0, n0, lane);
    ledger.update(s, acc_o, p.scale_log2);
    mma_regs_kn<kRT, kNT, kDT, L::KV>(acc_o, s, s_v, 0, lane);
    __syncthreads();  // the stage is refilled by the next iteration's prefetch
  }

  cp_async_wait<0>();  // the Q copy is still in flight when the tile sees no key
  __syncthreads();

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
