// The shape grid and FLOP counts of `flashgen bench`, against h200-peers.md's grid and
// formulas written out independently here (and, for windows, counted pair by pair).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tools/flashgen/bench_grid.h"

namespace flashgen::cli {
namespace {

class BenchGrid : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  int uniform(int lo, int hi) { return std::uniform_int_distribution(lo, hi)(rng_); }

  unsigned seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(BenchGrid, DefaultsAreTheGridOfH200Peers) {
  const BenchPlan plan = make_bench_plan(BenchOptions{});
  EXPECT_EQ(plan.dtype, DType::bf16);
  ASSERT_EQ(plan.passes.size(), 3u);
  ASSERT_EQ(plan.shapes.size(), 2u * 2u * 6u);
  std::set<std::tuple<int, bool, std::int64_t>> seen;
  for (const BenchShape& s : plan.shapes) {
    EXPECT_EQ(s.batch * s.seqlen, 16384) << s.seqlen;
    EXPECT_EQ(s.heads * s.head_dim, 2048) << s.head_dim;
    EXPECT_EQ(s.heads_kv, s.heads);
    EXPECT_EQ(s.options.window_left, -1);
    EXPECT_EQ(s.options.softcap, 0.0f);
    seen.insert({s.head_dim, s.options.causal, s.seqlen});
  }
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (std::int64_t n : {512, 1024, 2048, 4096, 8192, 16384}) EXPECT_TRUE(seen.count({d, causal, n})) << d << n;
}

TEST_F(BenchGrid, FlagsOverrideTheDerivedSizes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  BenchOptions o;
  const int kv = uniform(1, 5);
  o.head_dims = {uniform(1, 32) * 8};
  o.seqlens = {std::to_string(uniform(1, 9)) + "k", std::to_string(uniform(100, 3000))};
  o.batch = uniform(1, 7);
  o.heads = kv * uniform(1, 4);
  o.heads_kv = kv;
  o.causal = "on";
  o.dtype = "fp16";
  o.window = {uniform(0, 100), -1};
  o.passes = {"bwd"};
  const BenchPlan plan = make_bench_plan(o);
  EXPECT_EQ(plan.dtype, DType::f16);
  ASSERT_EQ(plan.shapes.size(), 2u);
  EXPECT_EQ(plan.shapes[0].seqlen, std::stoll(o.seqlens[0]) * 1024);
  EXPECT_EQ(plan.shapes[1].seqlen, std::stoll(o.seqlens[1]));
  for (const BenchShape& s : plan.shapes) {
    EXPECT_EQ(s.batch, o.batch);
    EXPECT_EQ(s.heads, o.heads);
    EXPECT_EQ(s.heads_kv, kv);
    EXPECT_TRUE(s.options.causal);
    EXPECT_EQ(s.options.window_left, o.window[0]);
  }
  EXPECT_THAT(plan.passes, ::testing::ElementsAre(BenchPass::backward));
}

TEST_F(BenchGrid, LayoutsPairEachDenseShapeWithItsPackedTwin) {
  BenchOptions o;
  o.layouts = {"dense", "varlen"};
  o.seqlens = {std::to_string(uniform(1, 64) * 64)};
  const BenchPlan plan = make_bench_plan(o);
  ASSERT_EQ(plan.shapes.size(), 2u * 2u * 2u);  // D x causal x layout
  for (std::size_t i = 0; i < plan.shapes.size(); i += 2) {
    const BenchShape &dense = plan.shapes[i], &packed = plan.shapes[i + 1];
    EXPECT_FALSE(dense.varlen);
    EXPECT_TRUE(packed.varlen);
    EXPECT_EQ(packed.batch * packed.seqlen, dense.batch * dense.seqlen);
    EXPECT_EQ(forward_flops(packed), forward_flops(dense));  // the same problem: the ratio is varlen's cost
  }
  o.layouts = {"ragged"};
  EXPECT_THAT([&] { make_bench_plan(o); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--layouts: got 'ragged', expected dense or varlen")));
}

TEST_F(BenchGrid, DecodeRowsAreIssue15sAtEveryPageSize) {
  BenchOptions o;
  o.decode = true;
  o.page_sizes = {0, uniform(1, 300)};
  const BenchPlan plan = make_bench_plan(o);
  ASSERT_EQ(plan.passes, std::vector<BenchPass>{BenchPass::forward});  // a KV-cache forward has no backward
  ASSERT_EQ(plan.shapes.size(), 5u * 2u);
  const std::int64_t rows[5][3] = {{64, 1, 8192}, {8, 1, 65536}, {1, 1, 262144}, {64, 4, 8192}, {8, 16, 16384}};
  for (std::size_t i = 0; i < plan.shapes.size(); ++i) {
    const BenchShape& s = plan.shapes[i];
    const auto& row = rows[i / 2];
    EXPECT_TRUE(s.decode());
    EXPECT_EQ(s.batch, row[0]);
    EXPECT_EQ(s.seqlen_q, row[1]);
    EXPECT_EQ(s.seqlen, row[2]);
    EXPECT_EQ(s.page_size, o.page_sizes[i % 2]);
    EXPECT_EQ(s.heads, 32);
    EXPECT_EQ(s.heads_kv, 8);
    EXPECT_EQ(s.head_dim, 128);
    // K and V bytes, and 4 B H sq sk D FLOPs: rows 1-2 read the issue's 2.15 GB.
    EXPECT_EQ(kv_bytes(s), 2.0 * row[0] * row[2] * 8 * 128 * 2);
    EXPECT_EQ(forward_flops(s), 4.0 * row[0] * 32 * row[1] * row[2] * 128);
  }
  EXPECT_NEAR(kv_bytes(plan.shapes[0]), 2.147e9, 1e6);
  o.page_sizes = {16, -2};
  EXPECT_THAT([&] { make_bench_plan(o); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--page-sizes: got -2, expected a page size >= 1")));
}

TEST_F(BenchGrid, LengthsAcceptAKSuffix) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int n = uniform(1, 1 << 20);
  EXPECT_EQ(parse_length(std::to_string(n), "--seqlens"), n);
  EXPECT_EQ(parse_length(std::to_string(n % 2048 + 1) + "k", "--seqlens"), (n % 2048 + 1) * 1024);
  EXPECT_EQ(parse_length("16K", "--seqlens"), 16384);
}

void expect_flag_error(const BenchOptions& o, const char* regex) {
  try {
    make_bench_plan(o);
    ADD_FAILURE() << "accepted; expected an error matching " << regex;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    EXPECT_THAT(e.what(), ::testing::ContainsRegex(regex));
  }
}

TEST_F(BenchGrid, BadFlagsNameTheFlagAndTheValue) {
  for (const char* bad : {"1x", "k", "", "-4", "0", "4kk", "1.5k", "99999999999"}) {
    BenchOptions o;
    o.seqlens = {"1k", bad};
    expect_flag_error(o, std::string("--seqlens: got '").append(bad).append("'").c_str());
  }
  BenchOptions o;
  o.dtype = "fp8";
  expect_flag_error(o, "--dtype: got 'fp8', expected bf16 or fp16");
  o = {};
  o.causal = "maybe";
  expect_flag_error(o, "--causal: got 'maybe'");
  o = {};
  o.passes = {"fwd", "bwdd"};
  expect_flag_error(o, "--passes: got 'bwdd'");
  o = {};
  o.heads = 12, o.heads_kv = 5;
  expect_flag_error(o, "--heads-kv: got 5, expected a divisor of the 12");
  o = {};
  o.window = {3};
  expect_flag_error(o, "--window: got 1 value");
  o = {};
  o.repeats = 0;
  expect_flag_error(o, "--repeats: got 0");
  o = {};
  o.head_dims = {128, -64};
  expect_flag_error(o, "--head-dims: got -64");
}

// h200-peers.md: forward 4·B·H·N²·D, halved when causal; backward 2.5×, fwd+bwd 3.5×.
TEST_F(BenchGrid, FlopsAreThoseOfH200Peers) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  BenchShape s;
  s.batch = uniform(1, 9), s.heads = uniform(1, 40), s.head_dim = uniform(1, 256), s.seqlen = uniform(1, 20000);
  const double dense = 4.0 * s.batch * s.heads * double(s.seqlen) * double(s.seqlen) * s.head_dim;
  EXPECT_DOUBLE_EQ(pass_flops(s, BenchPass::forward), dense);
  EXPECT_DOUBLE_EQ(pass_flops(s, BenchPass::backward), 2.5 * dense);
  EXPECT_DOUBLE_EQ(pass_flops(s, BenchPass::forward_backward), 3.5 * dense);
  s.options.causal = true;
  EXPECT_DOUBLE_EQ(pass_flops(s, BenchPass::forward), dense / 2);
  EXPECT_DOUBLE_EQ(pass_flops(s, BenchPass::backward), 2.5 * dense / 2);
  // The anchor's grid point D=128, N=16384 non-causal: 4·1·16·16384²·128.
  BenchShape anchor;
  anchor.batch = 1, anchor.heads = 16, anchor.head_dim = 128, anchor.seqlen = 16384;
  EXPECT_DOUBLE_EQ(forward_flops(anchor), 4.0 * 16 * 16384.0 * 16384.0 * 128);
}

TEST_F(BenchGrid, WindowFlopsCountTheVisiblePairs) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int trial = 0; trial < 20; ++trial) {
    BenchShape s;
    s.batch = uniform(1, 3), s.heads = uniform(1, 5), s.head_dim = uniform(1, 9), s.seqlen = uniform(1, 300);
    s.options.window_left = uniform(-1, 350);
    s.options.window_right = uniform(-1, 350);
    s.options.causal = uniform(0, 1) == 1;
    if (s.options.window_left < 0 && s.options.window_right < 0) s.options.window_left = 0;
    // The mask of AttentionOptions, pair by pair (causal: right = 0).
    const long right = s.options.causal ? 0 : s.options.window_right;
    long pairs = 0;
    for (long i = 0; i < s.seqlen; ++i)
      for (long j = 0; j < s.seqlen; ++j)
        pairs += (s.options.window_left < 0 || j >= i - s.options.window_left) && (right < 0 || j <= i + right);
    EXPECT_DOUBLE_EQ(forward_flops(s), 4.0 * s.batch * s.heads * double(pairs) * s.head_dim)
        << "N " << s.seqlen << " window " << s.options.window_left << "," << s.options.window_right << " causal "
        << s.options.causal;
  }
}

}  // namespace
}  // namespace flashgen::cli
