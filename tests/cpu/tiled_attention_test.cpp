// The tiled backend (ledger forward, recomputing backward) against the fp64 oracle over
// many shapes, options, layouts and dtypes; plus determinism, no writes outside the
// outputs, and the optional lse.
#include <gtest/gtest.h>

#include <cmath>

#include "attention_case.h"
#include "runtime/cpu/dtype_convert.h"

namespace flashgen::test {
namespace {

struct NamedCase {
  const char* name;
  Case c;
};

// The oracle's unrounded results for the inputs as stored (rounded to the case's dtype).
struct Reference {
  cpu::Fp64Outputs forward;
  cpu::Fp64Gradients backward;
};

Reference oracle(const Case& c, const Tensors& t) {
  const Problem p = make_problem(c);
  const auto q = read(t.q), k = read(t.k), v = read(t.v);
  return {cpu::standard_forward_f64(p, q, k, v, c.threads),
          cpu::standard_backward_f64(p, q, k, v, read(t.dout), c.threads)};
}

void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name << ": " << c.c.describe(); }

class TiledVsStandard : public testing::TestWithParam<NamedCase> {};

TEST_P(TiledVsStandard, AgreeWithinRounding) {
  const Case& c = GetParam().c;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " case " << c.describe());
  std::mt19937_64 rng(seed);
  Tensors t(c, rng);
  run_forward(Backend::tiled, c, t);
  run_backward(Backend::tiled, c, t);
  const Reference ref = oracle(c, t);

  expect_tiled_close(c.dtype, {read(t.o), read(t.lse), read(t.dq), read(t.dk), read(t.dv)},
                     {ref.forward.o, ref.forward.lse, ref.backward.dq, ref.backward.dk, ref.backward.dv});
  EXPECT_EQ(t.written_outside_outputs(), 0) << "elements written outside the output views";
}

Case make(Shape shape, bool causal = false, int left = -1, int right = -1) {
  Case c;
  c.shape = shape;
  c.options.causal = causal;
  c.options.window_left = left;
  c.options.window_right = right;
  return c;
}

Case with(Case c, DType dtype) {
  c.dtype = dtype;
  return c;
}
Case with(Case c, Layout layout) {
  c.layout = layout;
  return c;
}
Case with(Case c, cpu::TileConfig tiles) {
  c.tiles = tiles;
  return c;
}
Case with_threads(Case c, int threads) {
  c.threads = threads;
  return c;
}
Case with_softcap(Case c, float softcap, double magnitude, float scale = NAN) {
  c.options.softcap = softcap;
  c.options.softmax_scale = scale;
  c.magnitude = magnitude;
  return c;
}

const NamedCase kCases[] = {
    {"seqlen1", make({1, 1, 1, 2, 2, 64})},
    {"one_query_many_keys_causal", make({2, 1, 37, 2, 1, 32}, true)},
    {"odd_lengths", make({2, 37, 53, 4, 4, 32})},
    {"odd_lengths_causal", make({2, 37, 53, 4, 4, 32}, true)},
    {"more_queries_causal_masked_rows", make({1, 71, 29, 2, 2, 64}, true)},
    {"more_keys_causal", make({1, 29, 71, 2, 2, 64}, true)},
    {"more_queries", make({1, 50, 13, 2, 1, 48})},
    {"gqa_8_to_1_causal", make({1, 65, 65, 8, 1, 64}, true)},
    {"gqa_8_to_1", make({2, 33, 40, 8, 1, 32})},
    {"mqa_d80", make({2, 33, 47, 3, 1, 80})},
    {"d96_causal", make({1, 45, 45, 2, 2, 96}, true)},
    {"d128", make({1, 31, 39, 2, 1, 128})},
    {"d160", make({1, 27, 21, 2, 2, 160}, true)},
    {"d192", make({1, 23, 29, 2, 1, 192})},
    {"d256", make({1, 19, 23, 2, 1, 256}, true)},
    {"window_both_sides", make({1, 61, 61, 2, 2, 32}, false, 7, 3)},
    {"window_left_causal", make({1, 61, 77, 2, 1, 32}, true, 16)},
    {"window_left_only", make({1, 40, 33, 2, 2, 32}, false, 5, -1)},
    {"window_right_only", make({1, 33, 40, 2, 2, 32}, false, -1, 4)},
    {"softcap", with_softcap(make({1, 40, 40, 2, 2, 64}), 2.0f, 3.0)},
    {"softcap_causal_scaled", with_softcap(make({1, 41, 35, 4, 2, 32}, true), 5.0f, 4.0, 0.5f)},
    {"packed_qkv", with(make({2, 33, 33, 4, 2, 64}, true), Layout::packed_qkv)},
    {"heads_major", with(make({2, 29, 31, 4, 1, 32}), Layout::heads_major)},
    {"padded_causal", with(make({2, 29, 17, 3, 3, 40}, true), Layout::padded)},
    {"tiles_16x8_causal", with(make({1, 45, 50, 2, 1, 32}, true), cpu::TileConfig{16, 8})},
    {"tiles_1x1_window", with(make({1, 9, 11, 2, 1, 32}, false, 2, 1), cpu::TileConfig{1, 1})},
    {"tiles_13x7_gqa_causal", with(make({1, 40, 31, 4, 1, 64}, true), cpu::TileConfig{13, 7})},
    {"default_tiles_causal", with(make({1, 150, 170, 2, 1, 64}, true), cpu::TileConfig{})},
    {"tiles_larger_than_problem", with(make({1, 5, 7, 2, 2, 32}, true), cpu::TileConfig{128, 128})},
    {"one_thread", with_threads(make({1, 70, 70, 2, 1, 64}, true), 1)},
    {"five_threads", with_threads(make({1, 70, 70, 2, 1, 64}, true), 5)},
    {"fp16_gqa_causal", with(make({2, 37, 45, 4, 2, 64}, true), DType::f16)},
    {"fp16_padded_window", with(with(make({1, 33, 33, 2, 2, 96}, false, 9, 2), DType::f16), Layout::padded)},
    {"bf16_odd", with(make({2, 29, 41, 2, 1, 128}), DType::bf16)},
    {"bf16_packed_softcap",
     with(with(with_softcap(make({1, 31, 31, 4, 4, 64}, true), 3.0f, 3.0), DType::bf16), Layout::packed_qkv)},
    {"bf16_masked_rows", with(make({1, 50, 20, 2, 1, 32}, true), DType::bf16)},
};

INSTANTIATE_TEST_SUITE_P(Shapes, TiledVsStandard, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<NamedCase>& info) { return std::string(info.param.name); });

// A NaN in q (one element of one query row) or in k (one key) propagates as standard
// attention propagates it: to o and lse of every row that sees it and to every gradient
// that sums over such a row; rows that do not see it stay finite, and a row that sees no
// key keeps o = 0, lse = -inf, zero gradients. Both CPU backends.
TEST(TiledAttention, NanPropagatesLikeStandardAttention) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  for (Backend backend : {Backend::tiled, Backend::standard})
    for (bool nan_in_q : {true, false}) {
      SCOPED_TRACE(testing::Message() << (backend == Backend::tiled ? "tiled" : "standard")
                                      << (nan_in_q ? ", NaN in q row 5" : ", NaN in k row 7"));
      std::mt19937_64 rng(seed);
      // Causal over 20 queries, 12 keys: bottom-right aligned, queries 0..7 see no key.
      const Case c = make({1, 20, 12, 1, 1, 32}, true);
      Tensors t(c, rng);
      const std::int64_t dim = c.shape.head_dim;
      std::vector<double> x = read(nan_in_q ? t.q : t.k);
      x[(nan_in_q ? 13 : 7) * dim + 3] = NAN;  // query 13 (sees keys 0..5) or key 7
      write(nan_in_q ? t.q : t.k, x);
      run_forward(backend, c, t);
      run_backward(backend, c, t);
      const std::vector<double> lse = read(t.lse), o = read(t.o), dq = read(t.dq), dk = read(t.dk), dv = read(t.dv);
      for (std::int64_t i = 0; i < 20; ++i) {
        // Query i sees keys 0..i-8; with the NaN in key 7, queries 15.. see it.
        const bool empty = i < 8, poisoned = nan_in_q ? i == 13 : i >= 15;
        SCOPED_TRACE(testing::Message() << "query " << i);
        if (empty) {
          EXPECT_EQ(lse[i], -INFINITY);
          EXPECT_EQ(o[i * dim], 0.0);
          EXPECT_EQ(dq[i * dim], 0.0);
        } else {
          EXPECT_EQ(std::isnan(lse[i]), poisoned) << lse[i];
          EXPECT_EQ(std::isnan(o[i * dim]), poisoned) << o[i * dim];
        }
      }
      // Every key a poisoned row sees gets NaN gradients (dK, dV sum over the rows).
      for (std::int64_t j = 0; j < 12; ++j) {
        const bool poisoned = nan_in_q ? j <= 5 : true;  // key j is seen by queries j+8..19, including 15..
        EXPECT_EQ(std::isnan(dv[j * dim]), poisoned) << "dv of key " << j;
        EXPECT_EQ(std::isnan(dk[j * dim + 1]), poisoned) << "dk of key " << j;
      }
    }
}

TEST(TiledAttention, ResultsDoNotDependOnTheNumberOfThreads) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  Case c = make({2, 53, 47, 4, 2, 32}, true);
  c.tiles = {16, 16};
  Tensors t(c, rng);
  std::vector<std::vector<double>> first;
  for (int threads : {1, 3}) {
    c.threads = threads;
    t.poison_outputs();
    run_forward(Backend::tiled, c, t);
    run_backward(Backend::tiled, c, t);
    std::vector<std::vector<double>> results{read(t.o), read(t.lse), read(t.dq), read(t.dk), read(t.dv)};
    if (first.empty())
      first = results;
    else
      EXPECT_EQ(results, first) << "threads = 1 and threads = 3 differ";
  }
}

TEST(TiledAttention, ForwardWithoutLseStillComputesO) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const Case c = make({1, 21, 19, 2, 1, 32}, true);
  Tensors t(c, rng);
  ForwardArgs args = t.forward_args(c.options);
  args.lse.data = nullptr;
  Problem p = make_problem(c);
  p.has_lse = false;
  cpu::tiled_forward(args, p, c.threads, c.tiles);
  expect_close("o", read(t.o), oracle(c, t).forward.o, 0, 1e-5);
  for (double x : read(t.lse)) EXPECT_TRUE(std::isnan(x)) << "lse was written although not asked for";
}

TEST(TiledAttention, RejectsEmptyTiles) {
  std::mt19937_64 rng(fresh_seed());
  const Case c = make({1, 4, 4, 1, 1, 32});
  Tensors t(c, rng);
  for (cpu::TileConfig tiles : {cpu::TileConfig{0, 64}, cpu::TileConfig{64, -1}}) {
    try {
      cpu::tiled_forward(t.forward_args(c.options), make_problem(c), 1, tiles);
      ADD_FAILURE() << "tiles " << tiles.block_m << "x" << tiles.block_n << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("block_m"), std::string::npos) << e.what();
    }
  }
}

TEST(StandardAttention, TypedEntryPointsHonourLayoutsAndDtypes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (Layout layout : {Layout::padded, Layout::heads_major, Layout::packed_qkv})
    for (DType dtype : {DType::f32, DType::bf16}) {
      const Case c = with(with(make({2, 13, 13, 4, 2, 32}, true), layout), dtype);
      SCOPED_TRACE(c.describe());
      Tensors t(c, rng);
      run_forward(Backend::standard, c, t);
      run_backward(Backend::standard, c, t);
      const Reference ref = oracle(c, t);
      // Exact fp64 results, rounded once (through float) to the output dtype.
      const double u = cpu::unit_roundoff(c.dtype) + 0x1p-24;
      expect_close("o", read(t.o), ref.forward.o, u, 1e-12);
      expect_close("lse", read(t.lse), ref.forward.lse, 0x1p-24, 1e-12);
      expect_close("dq", read(t.dq), ref.backward.dq, u, 1e-12);
      expect_close("dk", read(t.dk), ref.backward.dk, u, 1e-12);
      expect_close("dv", read(t.dv), ref.backward.dv, u, 1e-12);
    }
}

}  // namespace
}  // namespace flashgen::test
