// Which keys a query sees, how a head of q maps to a head of k/v, how a raw score
// becomes a logit, and where an element lives: the contract of DESIGN.md in one
// place, shared by the standard and the tiled CPU attention.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "flashgen/flashgen.hpp"
#include "runtime/validate.h"

namespace flashgen::cpu {

// The running max of a softmax row, NaN-propagating (std::max(m, NaN) would keep m): a NaN
// logit makes the row's max, sum, lse and output NaN, as standard attention gives.
template <typename Real>
Real softmax_max(Real m, Real x) {
  return std::isnan(x) || x > m ? x : m;
}

// Keys [begin, end) of one query row; empty when begin >= end.
struct KeyRange {
  std::int64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
};

struct AttentionGeometry {
  std::int64_t seqlen_q, seqlen_k;
  std::int64_t diagonal_offset;            // seqlen_k - seqlen_q: causal is aligned bottom-right
  std::int64_t window_left, window_right;  // -1: unbounded on that side
  std::int64_t group;                      // query heads per k/v head
  double scale, softcap;

  explicit AttentionGeometry(const Problem& p)
      : seqlen_q(p.seqlen_q),
        seqlen_k(p.seqlen_k),
        diagonal_offset(p.seqlen_k - p.seqlen_q),
        window_left(p.options.window_left),
        window_right(p.options.window_right),
        group(p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1),
        scale(std::isnan(p.options.softmax_scale) ? 1.0 / std::sqrt(static_cast<double>(p.head_dim))
                                                  : p.options.softmax_scale),
        softcap(p.options.softcap) {
    // validate_* already folds causal into the window; doing it again keeps hand-built Problems honest.
    if (p.options.causal) window_right = window_right < 0 ? 0 : std::min<std::int64_t>(window_right, 0);
  }

  // The visible keys of a query form one interval, moving right as i grows.
  KeyRange visible_keys(std::int64_t i) const {
    const std::int64_t diagonal = i + diagonal_offset;
    KeyRange r{0, seqlen_k};
    if (window_left >= 0) r.begin = std::max<std::int64_t>(0, diagonal - window_left);
    if (window_right >= 0) r.end = std::min<std::int64_t>(seqlen_k, diagonal + window_right + 1);
    return r;
  }

  // Keys visible to any query of rows [row_begin, row_end).
  KeyRange visible_keys(std::int64_t row_begin, std::int64_t row_end) const {
    return {visible_keys(row_begin).begin, visible_keys(row_end - 1).end};
  }

  std::int64_t kv_head(std::int64_t query_head) const { return query_head / group; }

  // The logit of a query/key dot product: scaled, then soft-capped (softcap * tanh(s / softcap)).
  template <class Real>
  Real logit(Real dot) const {
    const Real s = static_cast<Real>(scale) * dot;
    if (softcap <= 0) return s;
    const Real cap = static_cast<Real>(softcap);
    return cap * std::tanh(s / cap);
  }

  // d logit / d dot, from the logit itself: scale * (1 - tanh^2) under soft-capping.
  template <class Real>
  Real logit_slope(Real logit) const {
    if (softcap <= 0) return static_cast<Real>(scale);
    const Real t = logit / static_cast<Real>(softcap);
    return static_cast<Real>(scale) * (Real(1) - t * t);
  }
};

// Element (b, s, h, d) of a rank-4 tensor in the contract's layout, in elements.
inline std::int64_t element_index(const Tensor& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  return b * t.stride[0] + s * t.stride[1] + h * t.stride[2] + d * t.stride[3];
}

// Element (b, h, i) of the lse tensor (batch, heads_q, seqlen_q).
inline std::int64_t lse_index(const Tensor& t, std::int64_t b, std::int64_t h, std::int64_t i) {
  return b * t.stride[0] + h * t.stride[1] + i * t.stride[2];
}

}  // namespace flashgen::cpu
