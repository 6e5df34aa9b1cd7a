// FlashAttention's acceptance rule for one output, shared by the GPU and emulator tests:
//   max|out - ref| <= factor * max|pt - ref| + atol
// with ref the fp64 oracle, pt standard attention in the input precision and atol the
// rounding of ref to the input dtype; every element must be finite (written).
// lse must match the oracle within 1e-3 (and be -inf exactly where the oracle's is).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "input_precision_reference.h"

namespace flashgen::test {

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
    atol = std::max(atol, std::abs(static_cast<double>(round_to(t, static_cast<float>(ref[i]))) - ref[i]));
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
