// FlashAttention backward on the CPU. P is never stored: every tile recomputes it from
// Q, K and the ledger, P = exp(logit - lse). Three phases, each race-free by construction:
//   1. D = rowsum(dO ∘ O) per query row (the preprocess pass of the GPU backend);
//   2. one task per (batch, k/v head, K tile) accumulates dV += Pᵀ dO and dK += dSᵀ Q·scale
//      over every query head of its GQA group and every Q tile that sees the tile;
//   3. one task per (batch, query head, Q tile) accumulates dQ += dS K·scale.
// dS = P ∘ (dP − D) with dP = dO Vᵀ; soft-capping multiplies it by 1 − tanh².
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

// A K/V tile, transposed (head_dim x cols) so that a query row's logits and dP are axpy loops.
struct KvTile {
  std::int64_t col_begin = 0, cols = 0;
  std::vector<float> k, k_t, v_t;

  KvTile(std::int64_t block_n, std::int64_t dim) : k(block_n * dim), k_t(block_n * dim), v_t(block_n * dim) {}

  void load(const BackwardArgs& args, std::int64_t b, std::int64_t hk, std::int64_t begin, std::int64_t count,
            std::int64_t dim, std::vector<float>& scratch) {
    col_begin = begin;
    cols = count;
    load_rows(args.k, b, hk, begin, count, dim, k.data());
    load_rows(args.v, b, hk, begin, count, dim, scratch.data());
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t d = 0; d < dim; ++d) {
        k_t[d * cols + c] = k[c * dim + d];
        v_t[d * cols + c] = scratch[c * dim + d];
      }
  }
};

// The tile columns [c0, c1) a query row sees.
struct ColumnRange {
  std::int64_t c0, c1;
  bool empty() const { return c0 >= c1; }
};

ColumnRange visible_columns(const AttentionGeometry& g, std::int64_t row, const KvTile& tile) {
  const KeyRange keys = g.visible_keys(row);
  return {std::max(keys.begin, tile.col_begin) - tile.col_begin,
          std::min(keys.end, tile.col_begin + tile.cols) - tile.col_begin};
}

// One query row against one K/V tile: recomputes P from the ledger and ds, the gradient of the
// loss with respect to each q·k dot product (softmax backward, then soft-cap and scale).
void recompute_row(const AttentionGeometry& g, std::int64_t dim, const float* q, const float* dout, float lse,
                   float delta, const KvTile& tile, ColumnRange range, float* p, float* ds) {
  const std::int64_t cols = tile.cols;
  std::fill(p + range.c0, p + range.c1, 0.0f);
  std::fill(ds + range.c0, ds + range.c1, 0.0f);
  for (std::int64_t d = 0; d < dim; ++d) {
    const float qd = q[d], dod = dout[d];
    const float* kd = &tile.k_t[d * cols];
    const float* vd = &tile.v_t[d * cols];
    for (std::int64_t c = range.c0; c < range.c1; ++c) {
      p[c] += qd * kd[c];    // q·k, becomes P below
      ds[c] += dod * vd[c];  // dP = dO·v, becomes dS below
    }
  }
  for (std::int64_t c = range.c0; c < range.c1; ++c) {
    const float logit = g.logit(p[c]);
    p[c] = std::exp(logit - lse);
    ds[c] = p[c] * (ds[c] - delta) * g.logit_slope(logit);
  }
}

struct Backward {
  const BackwardArgs& args;
  const Problem& p;
  const AttentionGeometry g;
  const TileConfig tiles;
  std::vector<float> delta;  // D per (batch, query head, row)

  float lse(std::int64_t b, std::int64_t hq, std::int64_t i) const {
    return static_cast<const float*>(args.lse.data)[lse_index(args.lse, b, hq, i)];
  }
  std::int64_t row_index(std::int64_t b, std::int64_t hq, std::int64_t i) const {
    return (b * p.heads_q + hq) * p.seqlen_q + i;
  }

  void compute_delta(int threads) {
    delta.assign(p.batch * p.heads_q * p.seqlen_q, 0.0f);
    parallel_for(threads, p.batch * p.heads_q, [&](std::int64_t task) {
      const std::int64_t b = task / p.heads_q, hq = task % p.heads_q;
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        float sum = 0;
        for (std::int64_t d = 0; d < p.head_dim; ++d)
          sum += load_float(args.dout.data, args.dout.dtype, element_index(args.dout, b, i, hq, d)) *
                 load_float(args.o.data, args.o.dtype, element_index(args.o, b, i, hq, d));
        delta[row_index(b, hq, i)] = sum;
      }
    });
  }

  // Phase 2: dK and dV of one K/V tile, summed over the query heads of its group.
  void dk_dv_tile(std::int64_t b, std::int64_t hk, std::int64_t col_begin) const {
    const std::int64_t dim = p.head_dim, bm = tiles.block_m;
    const std::int64_t cols = std::min<std::int64_t>(tiles.block_n, p.seqlen_k - col_begin);
    std::vector<float> scratch(cols * dim), dk(cols * dim, 0.0f), dv(cols * dim, 0.0f);
    std::vector<float> q(bm * dim), dout(bm * dim), prob(cols), ds(cols);
    KvTile tile(cols, dim);
    tile.load(args, b, hk, col_begin, cols, dim, scratch);
    for (std::int64_t hq = hk * g.group; hq < (hk + 1) * g.group; ++hq) {
      for (std::int64_t row_begin = 0; row_begin < p.seqlen_q; row_begin += bm) {
        const std::int64_t rows = std::min(bm, p.seqlen_q - row_begin);
        const KeyRange seen = g.visible_keys(row_begin, row_begin + rows);
        if (seen.end <= col_begin || seen.begin >= col_begin + cols) continue;
        load_rows(args.q, b, hq, row_begin, rows, dim, q.data());
        load_rows(args.dout, b, hq, row_begin, rows, dim, dout.data());
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t i = row_begin + r;
          const ColumnRange range = visible_columns(g, i, tile);
          const float row_lse = lse(b, hq, i);
          if (range.empty() || row_lse == kNegInf) continue;
          const float* qr = &q[r * dim];
          const float* dor = &dout[r * dim];
          recompute_row(g, dim, qr, dor, row_lse, delta[row_index(b, hq, i)], tile, range, prob.data(), ds.data());
          for (std::int64_t c = range.c0; c < range.c1; ++c) {
            float* dvc = &dv[c * dim];
            float* dkc = &dk[c * dim];
            for (std::int64_t d = 0; d < dim; ++d) {
              dvc[d] += prob[c] * dor[d];
              dkc[d] += ds[c] * qr[d];
            }
          }
        }
      }
    }
    store_rows(args.dk, b, hk, col_begin, cols, dim, dk.data());
    store_rows(args.dv, b, hk, col_begin, cols, dim, dv.data());
  }

  // Phase 3: dQ of one Q tile of one query head.
  void dq_tile(std::int64_t b, std::int64_t hq, std::int64_t row_begin) const {
    const std::int64_t dim = p.head_dim, bn = tiles.block_n, hk = g.kv_head(hq);
    const std::int64_t rows = std::min<std::int64_t>(tiles.block_m, p.seqlen_q - row_begin);
    std::vector<float> q(rows * dim), dout(rows * dim), dq(rows * dim, 0.0f);
    std::vector<float> scratch(bn * dim), prob(bn), ds(bn);
    KvTile tile(bn, dim);
    load_rows(args.q, b, hq, row_begin, rows, dim, q.data());
    load_rows(args.dout, b, hq, row_begin, rows, dim, dout.data());
    const KeyRange seen = g.visible_keys(row_begin, row_begin + rows);
    for (std::int64_t col_begin = seen.begin / bn * bn; col_begin < seen.end; col_begin += bn) {
      tile.load(args, b, hk, col_begin, std::min(bn, p.seqlen_k - col_begin), dim, scratch);
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t i = row_begin + r;
        const ColumnRange range = visible_columns(g, i, tile);
        const float row_lse = lse(b, hq, i);
        if (range.empty() || row_lse == kNegInf) continue;
        recompute_row(g, dim, &q[r * dim], &dout[r * dim], row_lse, delta[row_index(b, hq, i)], tile, range,
                      prob.data(), ds.data());
        float* dqr = &dq[r * dim];
        for (std::int64_t c = range.c0; c < range.c1; ++c) {
          const float* kc = &tile.k[c * dim];
          for (std::int64_t d = 0; d < dim; ++d) dqr[d] += ds[c] * kc[d];
        }
      }
    }
    store_rows(args.dq, b, hq, row_begin, rows, dim, dq.data());
  }
};

}  // namespace

void tiled_backward(const BackwardArgs& args, const Problem& p, int threads, TileConfig tiles) {
  check_tile_config(tiles);
  Backward bwd{args, p, AttentionGeometry(p), tiles, {}};
  bwd.compute_delta(threads);

  const std::int64_t k_tiles = (p.seqlen_k + tiles.block_n - 1) / tiles.block_n;
  parallel_for(threads, p.batch * p.heads_kv * k_tiles, [&](std::int64_t task) {
    const std::int64_t t = task % k_tiles, bh = task / k_tiles;
    bwd.dk_dv_tile(bh / p.heads_kv, bh % p.heads_kv, t * tiles.block_n);
  });

  const std::int64_t q_tiles = (p.seqlen_q + tiles.block_m - 1) / tiles.block_m;
  parallel_for(threads, p.batch * p.heads_q * q_tiles, [&](std::int64_t task) {
    const std::int64_t t = task % q_tiles, bh = task / q_tiles;
    bwd.dq_tile(bh / p.heads_q, bh % p.heads_q, t * tiles.block_m);
  });
}

}  // namespace flashgen::cpu
