// The input-precision reference (input_precision_reference.h) of a forward over a KV cache,
// the companion of packed_kv_cache_oracle (tests/cpu/kv_cache_reference.h) for
// FlashAttention's rule: sequence b's queries, rows [cu_q[b], cu_q[b + 1]) of q (total_q,
// heads_q, head_dim), over its lengths[b] keys of row b of the dense (batch, capacity,
// heads_kv, head_dim) cache. o packed like q, 0 where no sequence or no key is.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "input_precision_reference.h"
#include "runtime/validate.h"

namespace flashgen::test {

inline std::vector<float> packed_kv_cache_pt(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                             const std::vector<float>& v, const std::vector<int>& cu_q,
                                             std::int64_t total_q, const std::vector<int>& lengths, int threads) {
  const std::int64_t q_row = p.heads_q * p.head_dim, row = p.heads_kv * p.head_dim;
  std::vector<float> out(static_cast<std::size_t>(total_q * q_row), 0.0f);
  const auto slice = [](const std::vector<float>& x, std::int64_t from, std::int64_t n) {
    return std::vector<float>(x.begin() + from, x.begin() + from + n);
  };
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const std::int64_t first = cu_q[b], n = cu_q[b + 1] - first;
    if (lengths[b] == 0 || n == 0) continue;
    Problem one = p;
    one.batch = 1;
    one.seqlen_q = n;
    one.seqlen_k = lengths[b];
    const std::int64_t keys = static_cast<std::int64_t>(b) * p.seqlen_k * row;
    const PtResult r = input_precision_attention(one, slice(q, first * q_row, n * q_row), slice(k, keys, lengths[b] * row),
                                                 slice(v, keys, lengths[b] * row),
                                                 std::vector<float>(static_cast<std::size_t>(n * q_row), 0.0f), threads);
    std::copy(r.o.begin(), r.o.end(), out.begin() + first * q_row);
  }
  return out;
}

}  // namespace flashgen::test
