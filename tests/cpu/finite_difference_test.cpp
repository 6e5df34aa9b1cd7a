// The oracle's backward against central finite differences of its own forward, in fp64:
// for the loss L = sum(dO ∘ O), dL/dx ≈ (L(x + h) - L(x - h)) / 2h for every input element.
// The tiled backward is then checked against this oracle (tiled_attention_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attention_case.h"

namespace flashgen::test {
namespace {

struct Inputs {
  std::vector<double> q, k, v, dout;
};

double loss(const Problem& p, const Inputs& in) {
  const cpu::Fp64Outputs out = cpu::standard_forward_f64(p, in.q, in.k, in.v);
  double sum = 0;
  for (std::size_t i = 0; i < out.o.size(); ++i) sum += in.dout[i] * out.o[i];
  return sum;
}

// Central differences of the loss with respect to every element of one input.
std::vector<double> numerical_gradient(const Problem& p, Inputs in, std::vector<double> Inputs::*input) {
  const double h = 1e-5;
  std::vector<double>& x = in.*input;
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(p, in);
    x[i] = saved - h;
    const double down = loss(p, in);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

struct GradientCase {
  const char* name;
  Shape shape;
  AttentionOptions options;
};

void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

class FiniteDifferences : public testing::TestWithParam<GradientCase> {};

TEST_P(FiniteDifferences, StandardBackwardMatchesCentralDifferences) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.5, 1.5);
  Case c;
  c.shape = GetParam().shape;
  c.options = GetParam().options;
  const Problem p = make_problem(c);
  const Shape& s = c.shape;
  Inputs in{std::vector<double>(s.batch * s.seqlen_q * s.heads_q * s.head_dim),
            std::vector<double>(s.batch * s.seqlen_k * s.heads_kv * s.head_dim),
            std::vector<double>(s.batch * s.seqlen_k * s.heads_kv * s.head_dim),
            std::vector<double>(s.batch * s.seqlen_q * s.heads_q * s.head_dim)};
  for (auto* t : {&in.q, &in.k, &in.v, &in.dout})
    for (double& x : *t) x = uniform(rng);

  const cpu::Fp64Gradients analytic = cpu::standard_backward_f64(p, in.q, in.k, in.v, in.dout);
  // Truncation error ~h^2 and cancellation error ~1e-16 / h: both far below 1e-7.
  const std::pair<const char*, std::pair<const std::vector<double>*, std::vector<double> Inputs::*>> checks[] = {
      {"dq", {&analytic.dq, &Inputs::q}}, {"dk", {&analytic.dk, &Inputs::k}}, {"dv", {&analytic.dv, &Inputs::v}}};
  for (const auto& [name, check] : checks) {
    const std::vector<double> numerical = numerical_gradient(p, in, check.second);
    const Difference diff = compare(*check.first, numerical);
    EXPECT_LE(diff.max_abs, 1e-7 * std::max(1.0, diff.max_ref)) << name << " worst element " << diff.worst;
  }
}

AttentionOptions options(bool causal, int left, int right, float softcap = 0, float scale = NAN) {
  AttentionOptions o;
  o.causal = causal;
  o.window_left = left;
  o.window_right = right;
  o.softcap = softcap;
  o.softmax_scale = scale;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    TinyShapes, FiniteDifferences,
    testing::Values(GradientCase{"plain", {2, 3, 5, 2, 2, 3}, options(false, -1, -1)},
                    GradientCase{"gqa", {1, 4, 4, 4, 2, 3}, options(false, -1, -1)},
                    GradientCase{"causal_more_keys", {1, 3, 5, 2, 1, 4}, options(true, -1, -1)},
                    GradientCase{"causal_more_queries_masked_rows", {1, 5, 3, 2, 1, 3}, options(true, -1, -1)},
                    GradientCase{"window", {1, 5, 6, 1, 1, 3}, options(false, 1, 2)},
                    GradientCase{"softcap", {1, 4, 5, 2, 1, 3}, options(false, -1, -1, 0.7f, 1.3f)},
                    GradientCase{"softcap_causal_window", {1, 5, 5, 2, 2, 4}, options(true, 2, -1, 1.5f)}),
    [](const testing::TestParamInfo<GradientCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace flashgen::test
