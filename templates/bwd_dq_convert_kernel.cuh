// Backward epilogue of the atomic path: dq = dq_accum * softmax_scale, rounded to
// the input dtype. One CTA = kBlockM query rows of one (batch, head).
namespace flash {

struct BwdDqConvertLayout {
  static constexpr int kBytes = 0;
};

__device__ __forceinline__ void bwd_dq_convert_kernel(const FlashAttentionParams& p) {
  constexpr int kThreads = kWarps * 32;
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kBlockM, h = blockIdx.y, b = blockIdx.z;
  const float* acc = p.dq_accum + ((static_cast<i64>(b) * p.heads_q + h) * p.seqlen_q_rounded + m0) * kHeadDimPadded;
  u16* dq = static_cast<u16*>(p.dq) + b * p.dq_stride.batch + h * p.dq_stride.head + m0 * p.dq_stride.row;
  const int rows = min(kBlockM, p.seqlen_q - m0);
  // Two columns per thread: head_dim is even or the pair is cut at head_dim.
  for (int i = tid; i < rows * kHeadDimPadded / 2; i += kThreads) {
    const int r = i / (kHeadDimPadded / 2), c = 2 * (i % (kHeadDimPadded / 2));
    if (c >= kHeadDim) continue;
    const float2 v = *reinterpret_cast<const float2*>(acc + r * kHeadDimPadded + c);
    u16* dst = dq + r * p.dq_stride.row + c;
    if (kVecLoad || c + 1 < kHeadDim) {
      if constexpr (kVecLoad) {
        *reinterpret_cast<u32*>(dst) = pack2(v.x * p.softmax_scale, v.y * p.softmax_scale);
      } else {
        dst[0] = from_float(v.x * p.softmax_scale);
        dst[1] = from_float(v.y * p.softmax_scale);
      }
    } else {
      dst[0] = from_float(v.x * p.softmax_scale);
    }
  }
}

}  // namespace flash
