// Standard attention, the oracle: for each (batch, query head) the full matrices S
// (logits) and P = softmax(S) are materialised in fp64, O = P V; the backward is the
// textbook chain rule on those matrices. Simple on purpose: no tiles, no ledger.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/parallel_for.h"
#include "runtime/cpu/tensor_io.h"

namespace flashgen::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Offsets of rows in a contiguous (batch, seqlen, heads, head_dim) fp64 tensor.
struct RowLayout {
  std::int64_t seqlen, heads, head_dim;
  std::int64_t operator()(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return ((b * seqlen + s) * heads + h) * head_dim;
  }
};

double dot(const double* a, const double* b, std::int64_t n) {
  double sum = 0;
  for (std::int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// S and P of one (batch, query head), row-major seqlen_q x seqlen_k; invisible entries have P = 0.
struct HeadScores {
  std::vector<double> logits, probs;
  std::vector<double> lse;  // per query row; -inf where the row sees no key
};

HeadScores head_scores(const Problem& p, const AttentionGeometry& g, std::span<const double> q,
                       std::span<const double> k, std::int64_t b, std::int64_t hq) {
  const RowLayout q_rows{p.seqlen_q, p.heads_q, p.head_dim}, k_rows{p.seqlen_k, p.heads_kv, p.head_dim};
  const std::int64_t hk = g.kv_head(hq), sk = p.seqlen_k;
  HeadScores h{std::vector<double>(p.seqlen_q * sk, 0.0), std::vector<double>(p.seqlen_q * sk, 0.0),
               std::vector<double>(p.seqlen_q, kNegInf)};
  for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
    const KeyRange keys = g.visible_keys(i);
    if (keys.empty()) continue;
    double* s = &h.logits[i * sk];
    double* pr = &h.probs[i * sk];
    double max = kNegInf;
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      s[j] = g.logit(dot(&q[q_rows(b, i, hq)], &k[k_rows(b, j, hk)], p.head_dim));
      max = softmax_max(max, s[j]);
    }
    double sum = 0;
    for (std::int64_t j = keys.begin; j < keys.end; ++j) sum += pr[j] = std::exp(s[j] - max);
    for (std::int64_t j = keys.begin; j < keys.end; ++j) pr[j] /= sum;
    h.lse[i] = max + std::log(sum);
  }
  return h;
}

void check_size(std::span<const double> t, std::int64_t expected, const char* name) {
  if (static_cast<std::int64_t>(t.size()) != expected)
    throw Error(Status::invalid_argument,
                fmt::format("standard attention (fp64): {} has {} elements, expected {}", name, t.size(), expected));
}

}  // namespace

Fp64Outputs standard_forward_f64(const Problem& p, std::span<const double> q, std::span<const double> k,
                                 std::span<const double> v, int threads) {
  const std::int64_t q_numel = p.batch * p.seqlen_q * p.heads_q * p.head_dim;
  const std::int64_t kv_numel = p.batch * p.seqlen_k * p.heads_kv * p.head_dim;
  check_size(q, q_numel, "q");
  check_size(k, kv_numel, "k");
  check_size(v, kv_numel, "v");
  const AttentionGeometry g(p);
  const RowLayout q_rows{p.seqlen_q, p.heads_q, p.head_dim}, k_rows{p.seqlen_k, p.heads_kv, p.head_dim};
  Fp64Outputs out{std::vector<double>(q_numel, 0.0), std::vector<double>(p.batch * p.heads_q * p.seqlen_q, kNegInf)};
  parallel_for(threads, p.batch * p.heads_q, [&](std::int64_t task) {
    const std::int64_t b = task / p.heads_q, hq = task % p.heads_q, hk = g.kv_head(hq);
    const HeadScores h = head_scores(p, g, q, k, b, hq);
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      out.lse[(b * p.heads_q + hq) * p.seqlen_q + i] = h.lse[i];
      double* o = &out.o[q_rows(b, i, hq)];
      for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
        const double pij = h.probs[i * p.seqlen_k + j];
        if (pij == 0) continue;
        const double* vj = &v[k_rows(b, j, hk)];
        for (std::int64_t d = 0; d < p.head_dim; ++d) o[d] += pij * vj[d];
      }
    }
  });
  return out;
}

Fp64Gradients standard_backward_f64(const Problem& p, std::span<const double> q, std::span<const double> k,
                                    std::span<const double> v, std::span<const double> dout, int threads) {
  const std::int64_t q_numel = p.batch * p.seqlen_q * p.heads_q * p.head_dim;
  const std::int64_t kv_numel = p.batch * p.seqlen_k * p.heads_kv * p.head_dim;
  check_size(q, q_numel, "q");
  check_size(k, kv_numel, "k");
  check_size(v, kv_numel, "v");
  check_size(dout, q_numel, "dout");
  const AttentionGeometry g(p);
  const RowLayout q_rows{p.seqlen_q, p.heads_q, p.head_dim}, k_rows{p.seqlen_k, p.heads_kv, p.head_dim};
  const std::int64_t sk = p.seqlen_k;
  Fp64Gradients grads{std::vector<double>(q_numel, 0.0), std::vector<double>(kv_numel, 0.0),
                      std::vector<double>(kv_numel, 0.0)};
  // One task per (batch, k/v head): it owns dK and dV of that head, summed over its query heads.
  parallel_for(threads, p.batch * p.heads_kv, [&](std::int64_t task) {
    const std::int64_t b = task / p.heads_kv, hk = task % p.heads_kv;
    std::vector<double> dlogit_row(sk);
    for (std::int64_t hq = hk * g.group; hq < (hk + 1) * g.group; ++hq) {
      const HeadScores h = head_scores(p, g, q, k, b, hq);
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeyRange keys = g.visible_keys(i);
        if (keys.empty()) continue;
        const double* s = &h.logits[i * sk];
        const double* pr = &h.probs[i * sk];
        const double* doi = &dout[q_rows(b, i, hq)];
        // dP = dO V^T; softmax backward: dS = P (dP - sum_j P dP); then through cap and scale.
        double p_dot_dp = 0;
        for (std::int64_t j = keys.begin; j < keys.end; ++j) {
          dlogit_row[j] = dot(doi, &v[k_rows(b, j, hk)], p.head_dim);
          p_dot_dp += pr[j] * dlogit_row[j];
        }
        const double* qi = &q[q_rows(b, i, hq)];
        double* dqi = &grads.dq[q_rows(b, i, hq)];
        for (std::int64_t j = keys.begin; j < keys.end; ++j) {
          const double ds = pr[j] * (dlogit_row[j] - p_dot_dp) * g.logit_slope(s[j]);
          const double* kj = &k[k_rows(b, j, hk)];
          double* dkj = &grads.dk[k_rows(b, j, hk)];
          double* dvj = &grads.dv[k_rows(b, j, hk)];
          for (std::int64_t d = 0; d < p.head_dim; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
            dvj[d] += pr[j] * doi[d];
          }
        }
      }
    }
  });
  return grads;
}

void standard_forward(const ForwardArgs& args, const Problem& p, int threads) {
  const Fp64Outputs out =
      standard_forward_f64(p, gather_f64(args.q, p.batch, p.seqlen_q, p.heads_q, p.head_dim),
                           gather_f64(args.k, p.batch, p.seqlen_k, p.heads_kv, p.head_dim),
                           gather_f64(args.v, p.batch, p.seqlen_k, p.heads_kv, p.head_dim), threads);
  scatter_f64(out.o, args.o, p.batch, p.seqlen_q, p.heads_q, p.head_dim);
  if (args.lse.data == nullptr) return;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i)
        static_cast<float*>(args.lse.data)[lse_index(args.lse, b, h, i)] =
            static_cast<float>(out.lse[(b * p.heads_q + h) * p.seqlen_q + i]);
}

void standard_backward(const BackwardArgs& args, const Problem& p, int threads) {
  const Fp64Gradients g =
      standard_backward_f64(p, gather_f64(args.q, p.batch, p.seqlen_q, p.heads_q, p.head_dim),
                            gather_f64(args.k, p.batch, p.seqlen_k, p.heads_kv, p.head_dim),
                            gather_f64(args.v, p.batch, p.seqlen_k, p.heads_kv, p.head_dim),
                            gather_f64(args.dout, p.batch, p.seqlen_q, p.heads_q, p.head_dim), threads);
  scatter_f64(g.dq, args.dq, p.batch, p.seqlen_q, p.heads_q, p.head_dim);
  scatter_f64(g.dk, args.dk, p.batch, p.seqlen_k, p.heads_kv, p.head_dim);
  scatter_f64(g.dv, args.dv, p.batch, p.seqlen_k, p.heads_kv, p.head_dim);
}

}  // namespace flashgen::cpu
