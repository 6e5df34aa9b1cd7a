// The schedule SVG (compiler/schedule_svg.h) read back: per pass, the drawn tiles of
// each class equal the model's counts, each visited tile carries its CTA and loop
// position, the buffer strips are there, and the tags nest.
#include "compiler/schedule_svg.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include "compiler/kernel_selection.h"
#include "svg_rects.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using test::SvgAttributes;

std::vector<PassSchedule> selected_schedules(const ProblemKey& key, const ScheduleShape& shape) {
  std::vector<KernelSpec> specs = select_forward_kernels(key, Arch::sm_90a);
  for (const KernelSpec& s : select_backward_kernels(key, Arch::sm_90a)) specs.push_back(s);
  std::vector<PassSchedule> passes;
  for (const KernelSpec& s : specs) passes.push_back(schedule_pass(s, shape));
  return passes;
}

void expect_svg_matches(const std::string& svg, const std::vector<PassSchedule>& passes) {
  ASSERT_EQ(svg.rfind("<?xml", 0), 0u);
  ASSERT_NE(svg.find("<svg "), std::string::npos);
  EXPECT_EQ(test::unbalanced_tag(svg), std::nullopt);
  const std::vector<SvgAttributes> rects = test::svg_rects(svg);
  const auto tiles = test::count_by_pass(rects, "tile ");
  const auto io = test::count_by_pass(rects, "io ");
  const auto row_blocks = test::count_by_pass(rects, "rowblock");
  std::map<std::tuple<std::string, std::string, std::string>, const SvgAttributes*> by_tile;
  for (const SvgAttributes& r : rects)
    if (r.count("data-q")) by_tile[{r.at("data-pass"), r.at("data-q"), r.at("data-k")}] = &r;
  for (const PassSchedule& s : passes) {
    const std::string pass = to_string(s.spec.pass);
    SCOPED_TRACE(s.spec.uri());
    auto drawn = [&](const auto& counts, const char* cls) {
      const auto it = counts.find({pass, cls});
      return it == counts.end() ? 0 : it->second;
    };
    for (TileState state : {TileState::computed, TileState::masked, TileState::skipped})
      EXPECT_EQ(drawn(tiles, to_string(state)), s.count(state)) << to_string(state);
    switch (s.spec.pass) {
      case Pass::fwd:
      case Pass::fwd_splitkv:
        EXPECT_EQ(drawn(io, "write"), s.q_tiles);  // lse, once per Q tile
        break;
      case Pass::bwd_dkdv: {
        int q_tiles_visited = 0;  // their lse and D are read, their dQ rows accumulated
        for (int q = 0; q < s.q_tiles; ++q) {
          bool visited = false;
          for (int k = 0; k < s.k_tiles; ++k) visited = visited || s.state(q, k) != TileState::skipped;
          q_tiles_visited += visited;
        }
        EXPECT_EQ(drawn(io, "write"), s.k_tiles);  // dK, dV
        EXPECT_EQ(drawn(io, "read"), q_tiles_visited);
        EXPECT_EQ(drawn(io, "atomic"), s.spec.deterministic ? 0 : q_tiles_visited);
        EXPECT_EQ(drawn(io, "unused"), (s.spec.deterministic ? 1 : 2) * (s.q_tiles - q_tiles_visited));
        break;
      }
      case Pass::bwd_dq:
        EXPECT_EQ(drawn(io, "read"), s.q_tiles);
        EXPECT_EQ(drawn(io, "write"), s.q_tiles);
        break;
      case Pass::bwd_preprocess:
      case Pass::bwd_dq_convert:
      case Pass::fwd_combine:
      case Pass::kv_append: {
        int with_rows = 0;
        for (const CtaWork& c : s.ctas) with_rows += c.row_end > c.row_begin;
        EXPECT_EQ(drawn(row_blocks, ""), with_rows);
        break;
      }
    }
    // Each visited tile of query head 0: its owner and its position in the owner's loop.
    for (const CtaWork& cta : s.ctas)
      for (size_t i = 0; i < cta.visits.size(); ++i) {
        const TileVisit& v = cta.visits[i];
        if (v.head != 0) continue;
        const auto found = by_tile.find({pass, std::to_string(v.q_tile), std::to_string(v.k_tile)});
        ASSERT_NE(found, by_tile.end()) << "tile " << v.q_tile << ", " << v.k_tile;
        const SvgAttributes& r = *found->second;
        EXPECT_EQ(r.at("data-cta"), std::to_string(cta.block_x + 1)) << "tile " << v.q_tile << ", " << v.k_tile;
        EXPECT_EQ(r.at("data-step"), std::to_string(i + 1)) << "tile " << v.q_tile << ", " << v.k_tile;
      }
  }
}

TEST(ScheduleSvg, DrawsWhatTheModelSchedules) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int head_dims[] = {64, 96, 128, 256};
  for (int n = 0; n < 12; ++n) {
    ProblemKey key;
    key.head_dim = head_dims[uniform(0, 3)];
    key.causal = uniform(0, 1);
    key.window = uniform(0, 2) == 0;
    key.deterministic = uniform(0, 1);
    ScheduleShape shape;
    shape.seqlen_q = 2 * uniform(0, 700) + 1;
    shape.seqlen_k = 2 * uniform(0, 700) + 1;
    shape.window_left = key.window ? uniform(-1, 400) : -1;
    shape.window_right = key.window ? uniform(-1, 400) : -1;
    shape.group = uniform(1, 4);
    key.seqlen_q = shape.seqlen_q;
    key.seqlen_k = shape.seqlen_k;
    SCOPED_TRACE(fmt::format("d{} causal={} window={} ({}, {}) deterministic={} N={} M={} group={}", key.head_dim,
                             key.causal, key.window, shape.window_left, shape.window_right, key.deterministic,
                             shape.seqlen_q, shape.seqlen_k, shape.group));
    const std::vector<PassSchedule> passes = selected_schedules(key, shape);
    expect_svg_matches(schedule_svg(passes, shape), passes);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ScheduleSvg, DrawsTheDecodeSchedule) {
  ProblemKey key;
  key.causal = true;
  key.heads_q = 16;
  key.heads_kv = 2;
  ScheduleShape shape;
  shape.seqlen_q = 16;
  shape.seqlen_k = 300;
  shape.window_right = 0;
  shape.group = 8;
  key.seqlen_q = shape.seqlen_q;
  key.seqlen_k = shape.seqlen_k;
  const std::vector<PassSchedule> passes = selected_schedules(key, shape);
  ASSERT_EQ(passes.at(0).spec.pass, Pass::fwd_splitkv);
  // 128 packed rows (16 positions x 8 heads) in 64-row tiles, positions 0..7 and 8..15; the
  // last key tile (288..319) reaches past the 300 keys and is cut by the causal diagonal.
  EXPECT_EQ(passes[0].spec.block_m, 64);
  EXPECT_EQ(passes[0].q_tiles, 2);
  EXPECT_EQ(passes[0].state(1, passes[0].k_tiles - 1), TileState::masked);
  EXPECT_EQ(passes.at(1).spec.pass, Pass::fwd_combine);
  expect_svg_matches(schedule_svg(passes, shape), passes);
}

// The persistent forward on 132 CTAs over 16 heads: the panel says so, and each tile of the
// first head names its CTA and its place in that CTA's walk (the snake under a causal mask:
// head 0's 16 tiles are ranks 0, 16, ..., 240: CTAs #1, #17, ..., #129, then from the far end).
TEST(ScheduleSvg, DrawsThePersistentWalk) {
  KernelSpec spec;
  spec.pass = Pass::fwd;
  spec.head_dim = 128;
  spec.block_m = spec.block_n = 128;
  spec.warps = 12;
  spec.arch = Arch::sm_90a;
  spec.causal = true;
  spec.persistent = true;
  ScheduleShape shape;
  shape.seqlen_q = shape.seqlen_k = 2048;
  shape.window_right = 0;
  shape.slices = 16;
  shape.ctas = 132;
  const std::vector<PassSchedule> passes{schedule_pass(spec, shape)};
  const std::string svg = schedule_svg(passes, shape);
  expect_svg_matches(svg, passes);
  EXPECT_NE(svg.find("persistent: 132 CTAs walk the tiles of 16 (head, batch) slices in rounds,"), std::string::npos);
  const PassSchedule& s = passes[0];
  ASSERT_EQ(s.ctas.size(), 16u);
  EXPECT_EQ(s.ctas[0].tile, 15);  // longest first
  EXPECT_EQ(s.ctas[0].block_x, 0);
  EXPECT_EQ(s.ctas[8].block_x, 128);  // rank 128, round 0
  EXPECT_EQ(s.ctas[8].round, 0);
  EXPECT_EQ(s.ctas[9].block_x, 131 - 12);  // rank 144: round 1, 12 into it, from the far end
  EXPECT_EQ(s.ctas[9].round, 1);
  EXPECT_NE(svg.find("CTA #120 (tile 2 of its walk), iteration 1 of "), std::string::npos);
}

TEST(ScheduleSvg, DrawsTheMaskEdgesOfTheSpec) {
  ProblemKey key;
  key.causal = true;
  key.window = true;
  ScheduleShape shape;
  shape.seqlen_q = 333;
  shape.seqlen_k = 517;
  shape.window_left = 100;
  const std::string svg = schedule_svg(selected_schedules(key, shape), shape);
  // One diagonal and one left edge per tile-loop panel (fwd, dkdv, dq_convert has none).
  auto count = [&](const std::string& s) {
    int n = 0;
    for (size_t at = svg.find(s); at != std::string::npos; at = svg.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("class=\"edge diagonal\""), 2);
  EXPECT_EQ(count("class=\"edge left\""), 2);
  EXPECT_NE(svg.find("seqlen_q N = 333, seqlen_k M = 517"), std::string::npos);

  key.causal = key.window = false;
  const std::string plain = schedule_svg(selected_schedules(key, shape), shape);
  EXPECT_EQ(plain.find("class=\"edge"), std::string::npos);
}

TEST(ScheduleSvg, RefusesPicturesTooLargeToRead) {
  KernelSpec spec;
  spec.block_m = 16;
  spec.block_n = 16;
  ScheduleShape shape;
  shape.seqlen_q = shape.seqlen_k = 16 * 300;
  try {
    schedule_svg({schedule_pass(spec, shape)}, shape);
    FAIL() << "90000 tiles drawn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("300 x 300 tiles"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashgen
