#include "input_precision_reference.h"

#include <cmath>
#include <limits>

#include "runtime/cpu/dtype_convert.h"
#include "runtime/cpu/parallel_for.h"

namespace flashgen::test {

float round_to(DType t, float x) {
  if (t == DType::bf16) return cpu::bf16_bits_to_float(cpu::float_to_bf16_bits(x));
  if (t == DType::f16) return cpu::half_bits_to_float(cpu::float_to_half_bits(x));
  return x;
}

namespace {

struct Layout {
  std::int64_t seqlen, heads, d;
  std::int64_t at(std::int64_t b, std::int64_t s, std::int64_t h) const { return ((b * seqlen + s) * heads + h) * d; }
};

bool visible(const Problem& p, std::int64_t i, std::int64_t j) {
  const std::int64_t off = p.seqlen_k - p.seqlen_q;
  const AttentionOptions& o = p.options;
  if (o.window_left >= 0 && j < i + off - o.window_left) return false;
  if (o.window_right >= 0 && j > i + off + o.window_right) return false;
  return true;
}

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0;
  for (std::int64_t x = 0; x < n; ++x) s += a[x] * b[x];
  return s;
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// One KV head and the query heads of its group: forward then backward.
void group_task(const Problem& p, std::int64_t b, std::int64_t hk, const std::vector<float>& q,
                const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& dout,
                PtResult& r) {
  const DType t = p.dtype;
  const std::int64_t sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;
  const Layout lq{sq, p.heads_q, d}, lk{sk, p.heads_kv, d};
  const float scale = p.options.softmax_scale, cap = p.options.softcap;
  std::vector<float> dk_acc(sk * d, 0.0f), dv_acc(sk * d, 0.0f);
  std::vector<float> prob(sk), dtanh(sk), ds(sk), o_row(d), dq_row(d);
  const std::int64_t group = p.heads_q / p.heads_kv;
  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    for (std::int64_t i = 0; i < sq; ++i) {
      const float* qi = &q[lq.at(b, i, h)];
      const float* doi = &dout[lq.at(b, i, h)];
      float mx = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < sk; ++j) {
        float s = dot(qi, &k[lk.at(b, j, hk)], d) * scale;
        dtanh[j] = 1.0f;
        if (cap > 0) {
          const float th = std::tanh(s / cap);
          s = cap * th;
          dtanh[j] = 1.0f - th * th;
        }
        prob[j] = visible(p, i, j) ? s : -std::numeric_limits<float>::infinity();
        mx = std::max(mx, prob[j]);
      }
      float sum = 0;
      for (std::int64_t j = 0; j < sk; ++j) {
        prob[j] = mx == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(prob[j] - mx);
        sum += prob[j];
      }
      r.lse[(b * p.heads_q + h) * sq + i] = sum > 0 ? mx + std::log(sum) : -std::numeric_limits<float>::infinity();
      std::fill(o_row.begin(), o_row.end(), 0.0f);
      for (std::int64_t j = 0; j < sk; ++j) {
        prob[j] = sum > 0 ? round_to(t, prob[j] / sum) : 0.0f;
        if (prob[j] != 0) axpy(prob[j], &v[lk.at(b, j, hk)], o_row.data(), d);
      }
      for (std::int64_t x = 0; x < d; ++x) o_row[x] = round_to(t, o_row[x]);
      std::copy(o_row.begin(), o_row.end(), r.o.begin() + lq.at(b, i, h));

      const float di = dot(doi, o_row.data(), d);
      std::fill(dq_row.begin(), dq_row.end(), 0.0f);
      for (std::int64_t j = 0; j < sk; ++j) {
        if (prob[j] == 0) continue;
        const float dp = round_to(t, dot(doi, &v[lk.at(b, j, hk)], d));
        const float dsj = round_to(t, prob[j] * (dp - di) * dtanh[j]);
        axpy(prob[j], doi, &dv_acc[j * d], d);
        axpy(dsj * scale, qi, &dk_acc[j * d], d);
        axpy(dsj * scale, &k[lk.at(b, j, hk)], dq_row.data(), d);
      }
      for (std::int64_t x = 0; x < d; ++x) r.dq[lq.at(b, i, h) + x] = round_to(t, dq_row[x]);
    }
  }
  for (std::int64_t j = 0; j < sk; ++j)
    for (std::int64_t x = 0; x < d; ++x) {
      r.dk[lk.at(b, j, hk) + x] = round_to(t, dk_acc[j * d + x]);
      r.dv[lk.at(b, j, hk) + x] = round_to(t, dv_acc[j * d + x]);
    }
}

}  // namespace

PtResult input_precision_attention(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const std::vector<float>& dout, int threads) {
  PtResult r;
  r.o.assign(q.size(), 0.0f);
  r.dq.assign(q.size(), 0.0f);
  r.dk.assign(k.size(), 0.0f);
  r.dv.assign(v.size(), 0.0f);
  r.lse.assign(p.batch * p.heads_q * p.seqlen_q, 0.0f);
  cpu::parallel_for(threads > 0 ? threads : 1, p.batch * p.heads_kv,
                    [&](std::int64_t i) { group_task(p, i / p.heads_kv, i % p.heads_kv, q, k, v, dout, r); });
  return r;
}

}  // namespace flashgen::test
