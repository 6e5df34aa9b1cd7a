// FlashAttention's acceptance rule for one output, shared by the GPU and emulator tests:
//   max|out - ref| <= factor * max|pt - ref| + atol
// with ref the fp64 oracle, pt standard attention in the input precision and atol one step of
// the input dtype at max|ref|: out is rounded once to that dtype, so it may lie half a step
// from its fp32 value wherever that falls, and on tensors of a few dozen elements (decode at
// tiny head dims) max|pt - ref| alone is too small a sample to cover it (FlashAttention's
// tests add the same kind of term). Every element must be finite (written).
// lse must match the oracle within 1e-3 (and be -inf exactly where the oracle's is).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "input_precision_reference.h"

namespace flashgen::test {

// The spacing of dtype t's values around x: 2^(exponent of x - mantissa bits), at least the
// smallest subnormal step.
inline double dtype_step(DType t, double x) {
  const int bits = t == DType::f16 ? 10 : t == DType::bf16 ? 7 : 23;
  const int min_exp = t == DType::f16 ? -24 : t == DType::bf16 ? -133 : -149;
  if (x == 0) return std::ldexp(1.0, min_exp);
  int e = 0;
  std::frexp(x, &e);  // |x| = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1 - bits, min_exp));
}

inline void expect_rule(const char* what, const std::vector<float>& out, const std::vector<double>& ref,
                        const std::vector<float>& pt, DType t, double factor) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  double err = 0, pt_err = 0, atol = 0;
  std::size_t worst = 0, non_finite = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++non_finite;
      continue;
    }
    const double e = std::abs(out[i] - ref[i]);
    if (e > err) err = e, worst = i;
    pt_err = std::max(pt_err, std::abs(pt[i] - ref[i]));
    atol = std::max(atol, dtype_step(t, ref[i]));
  }
  EXPECT_EQ(non_finite, 0u) << what << ": elements not finite (unwritten or NaN)";
  EXPECT_LE(err, factor * pt_err + atol + 1e-6)
      << what << ": max |out - ref| = " << err << " at " << worst << " (out " << out[worst] << ", ref " << ref[worst]
      << "), max |pt - ref| = " << pt_err << ", atol = " << atol;
}

inline void expect_lse(const std::vector<float>& lse, const std::vector<double>& ref) {
  ASSERT_EQ(lse.size(), ref.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    const bool ok = std::isinf(ref[i]) ? (std::isinf(lse[i]) && lse[i] < 0) : std::abs(lse[i] - ref[i]) <= 1e-3;
    if (!ok && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << "lse: " << bad << " rows off by more than 1e-3; first at " << first << ": " << lse[first]
                     << " vs " << ref[first];
}

}  // namespace flashgen::test
