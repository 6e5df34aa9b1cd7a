// The CPU backend's KV append (Runtime::append_kv): the reference the kernel is tested
// against. Rotations are computed in double and rounded once to the destination's dtype.
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/dtype_convert.h"
#include "runtime/cpu/parallel_for.h"

namespace flashgen::cpu {
namespace {

// Element 0 of head h of a row of k, v or q: row i of sequence b of a dense (batch, seqlen,
// heads, head_dim) tensor, or packed row `packed_row` of a (total, heads, head_dim) one. The
// last dimension is contiguous (validated): element c is c further.
std::int64_t row_start(const Tensor& t, std::int64_t b, std::int64_t i, std::int64_t packed_row, std::int64_t h) {
  return t.rank == 4 ? element_index(t, b, i, h, 0) : packed_row * t.stride[0] + h * t.stride[1];
}

std::int32_t index_at(const Tensor& t, std::int64_t i, std::int64_t j = 0) {
  return static_cast<const std::int32_t*>(t.data)[i * t.stride[0] + (t.rank > 1 ? j * t.stride[1] : 0)];
}

// Row `x` (head_dim values) rotated in place at position `pos` (Rotary's convention).
void rotate(std::vector<double>& x, const KvAppendArgs& args, std::int64_t rotary_dim, std::int64_t pos) {
  const Tensor &cos = args.rotary.cos, &sin = args.rotary.sin;
  const std::int64_t half = rotary_dim / 2;
  for (std::int64_t j = 0; j < half; ++j) {
    const double c = load_float(cos.data, cos.dtype, pos * cos.stride[0] + j);
    const double s = load_float(sin.data, sin.dtype, pos * sin.stride[0] + j);
    const std::int64_t lo = args.rotary.interleaved ? 2 * j : j, hi = args.rotary.interleaved ? 2 * j + 1 : j + half;
    const double a = x[lo], b = x[hi];
    x[lo] = a * c - b * s;
    x[hi] = a * s + b * c;
  }
}

}  // namespace

void kv_append(const KvAppendArgs& args, const KvAppendProblem& a, int threads) {
  const Problem& p = a.cache;
  const std::int64_t d = p.head_dim;
  // Row `task` of k (or q) as (sequence, its new row): dense, of `seqlen` rows each; packed, by
  // the offsets validation checked (false: a row outside every sequence).
  std::vector<std::int64_t> cu;
  for (std::int64_t b = 0; a.packed && b <= p.batch; ++b) cu.push_back(index_at(args.cu_seqlens, b));
  const auto locate = [&](std::int64_t task, std::int64_t seqlen, std::int64_t& b, std::int64_t& i) {
    if (!a.packed) {
      b = task / seqlen, i = task % seqlen;
      return true;
    }
    b = std::upper_bound(cu.begin(), cu.end(), task) - cu.begin() - 1;
    i = task - (b >= 0 ? cu[b] : 0);
    return b >= 0 && b < p.batch;
  };
  // One task per new row: each writes its own cache rows.
  parallel_for(threads, a.new_rows(), [&](std::int64_t task) {
    std::int64_t b = 0, i = 0;
    if (!locate(task, a.seqlen_new, b, i)) return;
    const std::int64_t pos = index_at(args.cache_seqlens, b) + i;
    std::int64_t outer = b, row = pos;  // the cache's first two indices of the position
    if (p.paged) {
      outer = index_at(args.block_table, b, pos / p.page_size);
      row = pos % p.page_size;
    }
    std::vector<double> x(static_cast<std::size_t>(d));
    for (std::int64_t h = 0; h < p.heads_kv; ++h)
      for (const auto& [src, dst, rotated] : {std::tuple{&args.k, &args.k_cache, a.rotary_dim > 0},
                                              std::tuple{&args.v, &args.v_cache, false}}) {
        const std::int64_t from = row_start(*src, b, i, task, h), to = element_index(*dst, outer, row, h, 0);
        for (std::int64_t c = 0; c < d; ++c) x[c] = load_float(src->data, src->dtype, from + c);
        if (rotated) rotate(x, args, a.rotary_dim, pos);
        for (std::int64_t c = 0; c < d; ++c) store_float(dst->data, dst->dtype, to + c, static_cast<float>(x[c]));
      }
  });
  if (!a.rotate_q) return;
  parallel_for(threads, a.query_rows(), [&](std::int64_t task) {
    std::int64_t b = 0, i = 0;
    if (!locate(task, p.seqlen_q, b, i)) return;
    const std::int64_t pos = index_at(args.cache_seqlens, b) + (args.q_at_consecutive_positions ? i : 0);
    std::vector<double> x(static_cast<std::size_t>(d));
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t from = row_start(args.q, b, i, task, h), to = row_start(args.q_rotated, b, i, task, h);
      for (std::int64_t c = 0; c < d; ++c) x[c] = load_float(args.q.data, args.q.dtype, from + c);
      rotate(x, args, a.rotary_dim, pos);
      for (std::int64_t c = 0; c < d; ++c)
        store_float(args.q_rotated.data, args.q_rotated.dtype, to + c, static_cast<float>(x[c]));
    }
  });
}

}  // namespace flashgen::cpu
