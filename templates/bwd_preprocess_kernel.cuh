// Backward preprocess. One CTA = kBlockM query rows of one (batch, head):
// D = rowsum(dO * O) in fp32 into dsum (0 for rows past seqlen_q), and, when dQ is
// accumulated with atomics, the fp32 dQ accumulator rows zeroed.
namespace flash {

struct BwdPreprocessLayout {
  static constexpr int kBytes = 0;
};

__device__ __forceinline__ void bwd_preprocess_kernel(const FlashAttentionParams& p) {
  constexpr int kThreads = kWarps * 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.x * kBlockM, h = blockIdx.y, b = blockIdx.z;
  const i64 row_base = (static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q_rounded + m0;

  const u16* o = static_cast<const u16*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;
  const u16* dout = static_cast<const u16*>(p.dout) + b * p.dout_stride.batch + h * p.dout_stride.head;
  for (int r = warp; r < kBlockM; r += kWarps) {
    const int row = m0 + r;
    float sum = 0.0f;
    if (row < p.seqlen_q) {
      const u16* o_row = o + row * p.o_stride.row;
      const u16* do_row = dout + row * p.dout_stride.row;
      for (int c = lane; c < kHeadDim; c += 32) sum += to_float(o_row[c]) * to_float(do_row[c]);
    }
#pragma unroll
    for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
    if (lane == 0) p.dsum[row_base + r] = sum;
  }

  if constexpr (!kDeterministic) {
    float4* acc = reinterpret_cast<float4*>(p.dq_accum + row_base * kHeadDimPadded);
    for (int i = tid; i < kBlockM * kHeadDimPadded / 4; i += kThreads) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

}  // namespace flash
