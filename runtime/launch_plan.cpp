#include "runtime/launch_plan.h"

#include "compiler/kernel_selection.h"

namespace flashgen {
namespace {

// seqlen_q_rounded: every pass that indexes the dQ accumulator has a block_m dividing it.
constexpr std::int64_t kDqRowRounding = 128;

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

ProblemKey problem_key(const Problem& p) {
  const AttentionOptions& o = p.options;
  ProblemKey k;
  k.head_dim = static_cast<int>(p.head_dim);
  k.dtype = p.dtype;
  k.causal = o.causal;
  // Causal arrives folded into window_right = 0; any other bound needs the window kernels.
  k.window = o.window_left >= 0 || (o.window_right >= 0 && !(o.causal && o.window_right == 0));
  k.softcap = o.softcap > 0.0f;
  k.deterministic = o.deterministic;
  k.batch = p.batch;
  k.heads_q = p.heads_q;
  k.heads_kv = p.heads_kv;
  k.seqlen_q = p.seqlen_q;
  k.seqlen_k = p.seqlen_k;
  return k;
}

ProblemKey problem_key(const TuneShape& shape) {
  Problem p;
  p.head_dim = shape.head_dim;
  p.dtype = shape.dtype;
  p.seqlen_q = shape.seqlen_q;
  p.seqlen_k = shape.seqlen_k;
  p.batch = p.heads_q = p.heads_kv = 1;
  p.options = shape.options;
  if (p.options.causal) p.options.window_right = 0;  // as validate() folds it
  return problem_key(p);
}

namespace {

FlashStrides strides(const Tensor& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

// The fields every pass reads.
FlashAttentionParams base_params(const Problem& p) {
  FlashAttentionParams f{};
  f.batch = static_cast<int>(p.batch);
  f.seqlen_q = static_cast<int>(p.seqlen_q);
  f.seqlen_k = static_cast<int>(p.seqlen_k);
  f.seqlen_q_rounded = static_cast<int>(round_up(p.seqlen_q, kDqRowRounding));
  f.heads_q = static_cast<int>(p.heads_q);
  f.heads_kv = static_cast<int>(p.heads_kv);
  f.head_dim = static_cast<int>(p.head_dim);
  const AttentionOptions& o = p.options;
  constexpr float kLog2e = 1.4426950408889634f;
  f.softmax_scale = o.softmax_scale;
  f.softcap = o.softcap;
  // With soft-capping the kernels apply the scale inside tanh; the softmax sees cap * tanh(.) unscaled.
  f.scale_log2 = o.softcap > 0.0f ? kLog2e : o.softmax_scale * kLog2e;
  f.window_left = o.window_left;
  f.window_right = o.window_right;
  return f;
}

unsigned blocks(std::int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

std::size_t dq_accum_bytes(const Problem& p) {
  if (p.options.deterministic) return 0;
  return static_cast<std::size_t>(p.batch * p.heads_q * round_up(p.seqlen_q, kDqRowRounding) *
                                  round_up(p.head_dim, 16)) *
         sizeof(float);
}

}  // namespace

std::size_t backward_workspace_bytes(const Problem& p) {
  return dq_accum_bytes(p) +
         static_cast<std::size_t>(p.batch * p.heads_q * round_up(p.seqlen_q, kDqRowRounding)) * sizeof(float);
}

std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, Arch arch) {
  return plan_forward(args, p, select_forward_kernels(problem_key(p), arch));
}

std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p, Arch arch, void* workspace) {
  return plan_backward(args, p, select_backward_kernels(problem_key(p), arch), workspace);
}

std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, const std::vector<KernelSpec>& specs) {
  const KernelSpec fwd = specs.at(0);
  KernelLaunch l{fwd, {blocks(p.seqlen_q, fwd.block_m), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch)},
                 base_params(p)};
  FlashAttentionParams& f = l.params;
  f.q = args.q.data;
  f.k = args.k.data;
  f.v = args.v.data;
  f.o = args.o.data;
  f.lse = p.has_lse ? static_cast<float*>(args.lse.data) : nullptr;
  f.q_stride = strides(args.q);
  f.k_stride = strides(args.k);
  f.v_stride = strides(args.v);
  f.o_stride = strides(args.o);
  return {l};
}

std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p,
                                        const std::vector<KernelSpec>& specs, void* workspace) {
  FlashAttentionParams f = base_params(p);
  f.q = args.q.data;
  f.k = args.k.data;
  f.v = args.v.data;
  f.o = args.o.data;
  f.lse = static_cast<float*>(args.lse.data);
  f.dout = args.dout.data;
  f.dq = args.dq.data;
  f.dk = args.dk.data;
  f.dv = args.dv.data;
  f.q_stride = strides(args.q);
  f.k_stride = strides(args.k);
  f.v_stride = strides(args.v);
  f.o_stride = strides(args.o);
  f.dout_stride = strides(args.dout);
  f.dq_stride = strides(args.dq);
  f.dk_stride = strides(args.dk);
  f.dv_stride = strides(args.dv);
  const std::size_t accum = dq_accum_bytes(p);
  f.dq_accum = accum ? static_cast<float*>(workspace) : nullptr;
  f.dsum = reinterpret_cast<float*>(static_cast<char*>(workspace) + accum);

  const unsigned hq = static_cast<unsigned>(p.heads_q), b = static_cast<unsigned>(p.batch);
  const std::int64_t rows = round_up(p.seqlen_q, kDqRowRounding);
  std::vector<KernelLaunch> out;
  for (const KernelSpec& s : specs) {
    switch (s.pass) {
      case Pass::bwd_preprocess:
      case Pass::bwd_dq_convert: out.push_back({s, {blocks(rows, s.block_m), hq, b}, f}); break;
      case Pass::bwd_dkdv:
        out.push_back({s, {blocks(p.seqlen_k, s.block_n), static_cast<unsigned>(p.heads_kv), b}, f});
        break;
      case Pass::bwd_dq: out.push_back({s, {blocks(p.seqlen_q, s.block_m), hq, b}, f}); break;
      case Pass::fwd: break;
    }
  }
  return out;
}

}  // namespace flashgen
