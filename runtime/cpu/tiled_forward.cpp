// FlashAttention forward on the CPU. One task per (batch, query head, Q tile): it walks
// the K/V tiles its rows can see, keeps per row only the ledger (m = running max of the
// logits, l = running sum of exp(logit - m)) and an unnormalised output accumulator, and
// rescales both by exp(m_old - m_new) whenever the max grows (online softmax). P never
// exists beyond one tile row; the ledger is stored as lse = m + log(l).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "runtime/cpu/attention_geometry.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/cpu/parallel_for.h"
#include "runtime/cpu/tensor_io.h"
#include "runtime/cpu/tile_config_check.h"

namespace flashgen::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct ForwardTile {
  const ForwardArgs& args;
  const Problem& p;
  const AttentionGeometry& g;
  TileConfig tiles;

  void run(std::int64_t b, std::int64_t hq, std::int64_t row_begin) const {
    const std::int64_t dim = p.head_dim, hk = g.kv_head(hq);
    const std::int64_t rows = std::min<std::int64_t>(tiles.block_m, p.seqlen_q - row_begin);
    std::vector<float> q(rows * dim), acc(rows * dim, 0.0f);
    std::vector<float> m(rows, kNegInf), l(rows, 0.0f);
    std::vector<float> k_t(dim * tiles.block_n), v(tiles.block_n * dim);
    std::vector<float> k(tiles.block_n * dim), s(tiles.block_n);
    load_rows(args.q, b, hq, row_begin, rows, dim, q.data());

    const KeyRange tile_keys = g.visible_keys(row_begin, row_begin + rows);
    const std::int64_t first_tile = tile_keys.begin / tiles.block_n * tiles.block_n;
    for (std::int64_t col_begin = first_tile; col_begin < tile_keys.end; col_begin += tiles.block_n) {
      const std::int64_t cols = std::min<std::int64_t>(tiles.block_n, p.seqlen_k - col_begin);
      load_rows(args.k, b, hk, col_begin, cols, dim, k.data());
      load_rows(args.v, b, hk, col_begin, cols, dim, v.data());
      // K transposed (dim x cols): the logits of a row become axpy loops over the tile's columns.
      for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t d = 0; d < dim; ++d) k_t[d * cols + c] = k[c * dim + d];

      for (std::int64_t r = 0; r < rows; ++r) {
        const KeyRange keys = g.visible_keys(row_begin + r);
        const std::int64_t c0 = std::max(keys.begin, col_begin) - col_begin;
        const std::int64_t c1 = std::min(keys.end, col_begin + cols) - col_begin;
        if (c0 >= c1) continue;
        std::fill(s.begin() + c0, s.begin() + c1, 0.0f);
        for (std::int64_t d = 0; d < dim; ++d) {
          const float qd = q[r * dim + d];
          const float* kd = &k_t[d * cols];
          for (std::int64_t c = c0; c < c1; ++c) s[c] += qd * kd[c];
        }
        float tile_max = kNegInf;
        for (std::int64_t c = c0; c < c1; ++c) {
          s[c] = g.logit(s[c]);
          tile_max = softmax_max(tile_max, s[c]);
        }
        // The ledger update: the old sum and accumulator were relative to the old max.
        float& row_max = m[r];
        const float new_max = softmax_max(row_max, tile_max);
        const float rescale = std::exp(row_max - new_max);  // 0 while the row had seen no key
        float* o = &acc[r * dim];
        for (std::int64_t d = 0; d < dim; ++d) o[d] *= rescale;
        float tile_sum = 0;
        for (std::int64_t c = c0; c < c1; ++c) {
          const float pc = std::exp(s[c] - new_max);
          tile_sum += pc;
          const float* vc = &v[c * dim];
          for (std::int64_t d = 0; d < dim; ++d) o[d] += pc * vc[d];
        }
        l[r] = l[r] * rescale + tile_sum;
        row_max = new_max;
      }
    }

    // Normalise; a row that saw no key keeps l = 0: o = 0, lse = -inf. A NaN logit made l NaN:
    // o and lse stay NaN.
    for (std::int64_t r = 0; r < rows; ++r) {
      const float sum = l[r];
      const bool empty = sum == 0.0f;
      const float inv = empty ? 0.0f : 1.0f / sum;
      for (std::int64_t d = 0; d < dim; ++d) acc[r * dim + d] *= inv;
      if (args.lse.data != nullptr)
        static_cast<float*>(args.lse.data)[lse_index(args.lse, b, hq, row_begin + r)] =
            empty ? kNegInf : m[r] + std::log(sum);
    }
    store_rows(args.o, b, hq, row_begin, rows, dim, acc.data());
  }
};

}  // namespace

void tiled_forward(const ForwardArgs& args, const Problem& p, int threads, TileConfig tiles) {
  check_tile_config(tiles);
  const AttentionGeometry g(p);
  const std::int64_t q_tiles = (p.seqlen_q + tiles.block_m - 1) / tiles.block_m;
  const ForwardTile tile{args, p, g, tiles};
  parallel_for(threads, p.batch * p.heads_q * q_tiles, [&](std::int64_t task) {
    const std::int64_t t = task % q_tiles, bh = task / q_tiles;
    tile.run(bh / p.heads_q, bh % p.heads_q, t * tiles.block_m);
  });
}

}  // namespace flashgen::cpu
