// Problems whose answer is known in closed form, run through both CPU backends: they
// keep the oracle honest (a wrong standard attention cannot hide behind agreement with
// the tiled one) and pin the edge cases: one key, uniform keys, large logits (to 2^16),
// rows that see no key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attention_case.h"

namespace flashgen::test {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Index of (b, s, h, d) in a contiguous logical (batch, seqlen, heads, head_dim) vector.
std::size_t at(const Shape& s, std::int64_t seqlen, std::int64_t heads, std::int64_t b, std::int64_t i, std::int64_t h,
               std::int64_t d) {
  return static_cast<std::size_t>(((b * seqlen + i) * heads + h) * s.head_dim + d);
}

class ClosedForm : public testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    rng_.seed(seed_);
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_P(ClosedForm, OneKeyGivesItsValueAndNoQueryOrKeyGradient) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  Case c;
  c.shape = {2, 7, 1, 4, 2, 40};
  const Shape& s = c.shape;
  Tensors t(c, rng_);
  run_forward(GetParam(), c, t);
  run_backward(GetParam(), c, t);
  const auto q = read(t.q), k = read(t.k), v = read(t.v), dout = read(t.dout);
  const auto o = read(t.o), lse = read(t.lse), dq = read(t.dq), dk = read(t.dk), dv = read(t.dv);
  const double scale = 1 / std::sqrt(40.0);
  std::vector<double> expected_dv(dv.size(), 0.0);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t i = 0; i < s.seqlen_q; ++i)
      for (std::int64_t h = 0; h < s.heads_q; ++h) {
        const std::int64_t hk = h / 2;
        double logit = 0;
        for (std::int64_t d = 0; d < s.head_dim; ++d) {
          ASSERT_NEAR(o[at(s, s.seqlen_q, s.heads_q, b, i, h, d)], v[at(s, 1, s.heads_kv, b, 0, hk, d)], 1e-7);
          ASSERT_NEAR(dq[at(s, s.seqlen_q, s.heads_q, b, i, h, d)], 0.0, 1e-6);
          logit += q[at(s, s.seqlen_q, s.heads_q, b, i, h, d)] * k[at(s, 1, s.heads_kv, b, 0, hk, d)];
          expected_dv[at(s, 1, s.heads_kv, b, 0, hk, d)] += dout[at(s, s.seqlen_q, s.heads_q, b, i, h, d)];
        }
        ASSERT_NEAR(lse[static_cast<std::size_t>((b * s.heads_q + h) * s.seqlen_q + i)], scale * logit, 1e-6);
      }
  for (double x : dk) ASSERT_NEAR(x, 0.0, 1e-6);
  EXPECT_LE(compare(dv, expected_dv).relative(), 1e-6);
}

TEST_P(ClosedForm, IdenticalKeysAverageTheVisibleValues) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  Case c;
  c.shape = {1, 9, 12, 2, 1, 16};
  c.options.causal = true;
  c.options.window_left = 5;  // query i sees keys [max(0, i - 2), i + 3]
  const Shape& s = c.shape;
  Tensors t(c, rng_);
  std::vector<double> k = read(t.k);
  for (std::int64_t j = 1; j < s.seqlen_k; ++j)
    for (std::int64_t d = 0; d < s.head_dim; ++d)
      k[at(s, s.seqlen_k, 1, 0, j, 0, d)] = k[at(s, s.seqlen_k, 1, 0, 0, 0, d)];
  write(t.k, k);
  run_forward(GetParam(), c, t);
  const auto q = read(t.q), v = read(t.v), o = read(t.o), lse = read(t.lse);
  for (std::int64_t h = 0; h < s.heads_q; ++h)
    for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
      const std::int64_t first = std::max<std::int64_t>(0, i - 2), last = i + 3, count = last - first + 1;
      double logit = 0;
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        double mean = 0;
        for (std::int64_t j = first; j <= last; ++j) mean += v[at(s, s.seqlen_k, 1, 0, j, 0, d)] / count;
        ASSERT_NEAR(o[at(s, s.seqlen_q, s.heads_q, 0, i, h, d)], mean, 1e-6) << "row " << i << " head " << h;
        logit += q[at(s, s.seqlen_q, s.heads_q, 0, i, h, d)] * k[at(s, s.seqlen_k, 1, 0, 0, 0, d)];
      }
      ASSERT_NEAR(lse[static_cast<std::size_t>(h * s.seqlen_q + i)], logit / 4 + std::log(count), 1e-5);
    }
}

// The supported logit range (flashgen.hpp, "Logit range"): the backward recomputes P from the
// fp32 lse, so every P carries a relative error of half an ulp of lse, |lse| * 2^-24: within
// fp16's precision (2^-11) up to |lse| = 2^13, bf16's (2^-8) up to 2^16. Checked here at
// magnitudes M of 1000, 2^13 and 2^16 against the closed form with that bound.
TEST_P(ClosedForm, LargeLogitsStayFiniteAndWithinTheLseRounding) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (const double m : {1000.0, 8192.0, 65536.0}) {
    SCOPED_TRACE(testing::Message() << "logit magnitude " << m);
    Case c;
    c.shape = {1, 2, 3, 1, 1, 4};
    c.options.softmax_scale = 1.0f;
    const Shape& s = c.shape;
    Tensors t(c, rng_);
    // Integer inputs make every logit exact: row 0 sees (M, -M, M - 1), row 1 (-M, M, 1 - M).
    write(t.q, {1, 0, 0, 0, -1, 0, 0, 0});
    write(t.k, {m, 0, 0, 0, -m, 0, 0, 0, m - 1, 0, 0, 0});
    run_forward(GetParam(), c, t);
    run_backward(GetParam(), c, t);
    const auto q = read(t.q), k = read(t.k), v = read(t.v), dout = read(t.dout);
    const double e = std::exp(-1.0);
    const double probs[2][3] = {{1 / (1 + e), 0, e / (1 + e)}, {0, 1, 0}};
    EXPECT_THAT(read(t.lse),
                testing::ElementsAre(testing::DoubleNear(m + std::log1p(e), m * 0x1p-23),
                                     testing::DoubleNear(m, m * 0x1p-23)));
    // The chain rule on the closed-form P. Each gradient element is a sum of terms; `size`
    // accumulates the sum of their magnitudes, which is what rounding errors scale with
    // (dq sums ds * k with |k| ~ M and cancels down to O(1)).
    std::vector<double> o(8, 0.0), dq(8, 0.0), dk(12, 0.0), dv(12, 0.0);
    std::vector<double> dq_size(8, 0.0), dk_size(12, 0.0), dv_size(12, 0.0);
    for (int i = 0; i < 2; ++i) {
      double dp[3], delta = 0;
      for (int j = 0; j < 3; ++j) {
        dp[j] = 0;
        for (int d = 0; d < 4; ++d) dp[j] += dout[at(s, 2, 1, 0, i, 0, d)] * v[at(s, 3, 1, 0, j, 0, d)];
        delta += probs[i][j] * dp[j];
      }
      for (int j = 0; j < 3; ++j) {
        const double ds = probs[i][j] * (dp[j] - delta);
        for (int d = 0; d < 4; ++d) {
          const std::size_t qi = at(s, 2, 1, 0, i, 0, d), kj = at(s, 3, 1, 0, j, 0, d);
          o[qi] += probs[i][j] * v[kj];
          dq[qi] += ds * k[kj];
          dk[kj] += ds * q[qi];
          dv[kj] += probs[i][j] * dout[qi];
          dq_size[qi] += std::abs(ds * k[kj]);
          dk_size[kj] += std::abs(ds * q[qi]);
          dv_size[kj] += std::abs(probs[i][j] * dout[qi]);
        }
      }
    }
    for (double x : read(t.o)) ASSERT_TRUE(std::isfinite(x));
    EXPECT_LE(compare(read(t.o), o).relative(), 1e-6);
    // Backward recomputes P = exp(logit - lse) from the fp32 lse, which near M is exact only
    // to half an ulp (2^-24 * 2^ceil(log2 M) absolute): every term carries that relative error.
    const double ledger_rounding = std::exp2(std::ceil(std::log2(m + 1))) * 0x1p-24;
    const auto expect_within = [&](const char* what, const std::vector<double>& got, const std::vector<double>& want,
                                   const std::vector<double>& size) {
      for (std::size_t e = 0; e < got.size(); ++e)
        EXPECT_NEAR(got[e], want[e], 2 * ledger_rounding * size[e] + 1e-12) << what << " element " << e;
    };
    expect_within("dq", read(t.dq), dq, dq_size);
    expect_within("dk", read(t.dk), dk, dk_size);
    expect_within("dv", read(t.dv), dv, dv_size);
  }
}

TEST_P(ClosedForm, RowsThatSeeNoKeyGiveZeroOutputMinusInfLseZeroGradients) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  struct Masking {
    Shape shape;
    bool causal;
    int window_left, window_right;
    std::int64_t masked_rows;  // rows 0 .. masked_rows - 1 see no key
  };
  // Causal with more queries than keys (bottom-right: query i sees keys j <= i - 5), and a
  // one-key window that slides off the start of the keys.
  for (const Masking& m :
       {Masking{{2, 9, 4, 2, 1, 24}, true, -1, -1, 5}, Masking{{1, 7, 3, 3, 3, 32}, false, 0, 0, 4}}) {
    Case c;
    c.shape = m.shape;
    c.options.causal = m.causal;
    c.options.window_left = m.window_left;
    c.options.window_right = m.window_right;
    SCOPED_TRACE(c.describe());
    const Shape& s = c.shape;
    Tensors t(c, rng_);
    run_forward(GetParam(), c, t);
    run_backward(GetParam(), c, t);
    const auto o = read(t.o), lse = read(t.lse), dq = read(t.dq), dk = read(t.dk), dv = read(t.dv);
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads_q; ++h)
        for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
          const bool masked = i < m.masked_rows;
          const double row_lse = lse[static_cast<std::size_t>((b * s.heads_q + h) * s.seqlen_q + i)];
          if (masked) {
            ASSERT_EQ(row_lse, kNegInf) << "row " << i;
          } else {
            ASSERT_TRUE(std::isfinite(row_lse)) << "row " << i;
          }
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            const double oi = o[at(s, s.seqlen_q, s.heads_q, b, i, h, d)];
            const double dqi = dq[at(s, s.seqlen_q, s.heads_q, b, i, h, d)];
            ASSERT_TRUE(std::isfinite(oi) && std::isfinite(dqi)) << "row " << i;
            if (masked) {
              ASSERT_TRUE(oi == 0 && dqi == 0) << "row " << i;
            }
          }
        }
    for (double x : dk) ASSERT_TRUE(std::isfinite(x));
    for (double x : dv) ASSERT_TRUE(std::isfinite(x));
  }
}

INSTANTIATE_TEST_SUITE_P(BothBackends, ClosedForm, testing::Values(Backend::standard, Backend::tiled),
                         [](const testing::TestParamInfo<Backend>& info) { return to_string(info.param); });

}  // namespace
}  // namespace flashgen::test
