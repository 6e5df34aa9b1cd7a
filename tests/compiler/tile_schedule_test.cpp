// The tile schedule model (compiler/tile_schedule.h) against a brute force over the
// elements of S: a tile is computed iff some (query, key) in it is visible, and masked
// iff it is computed and some query row of it (below seqlen_q) misses some key of its
// full extent (keys past seqlen_k are never visible). Visibility is written here from
// the contract in DESIGN.md, not from the kernels.
#include "compiler/tile_schedule.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include "tests/test_seed.h"

namespace flashgen {

// gtest prints the state by name.
void PrintTo(TileState s, std::ostream* os) { *os << to_string(s); }

namespace {

struct Problem {
  int seqlen_q, seqlen_k;
  bool causal, window;
  int left, right;  // window sizes, -1 = unbounded

  // DESIGN.md: query i sees key j <= i + seqlen_k - seqlen_q (causal, bottom-right);
  // a window adds i + off - left <= j <= i + off + right.
  bool sees(int i, int j) const {
    if (j < 0 || j >= seqlen_k) return false;
    const long diagonal = static_cast<long>(i) + seqlen_k - seqlen_q;
    if (causal && j > diagonal) return false;
    if (window && left >= 0 && j < diagonal - left) return false;
    if (window && right >= 0 && j > diagonal + right) return false;
    return true;
  }
};

TileState brute_force_state(const Problem& p, int block_m, int block_n, int q_tile, int k_tile) {
  bool any_visible = false, any_hidden = false;
  for (int i = q_tile * block_m; i < std::min((q_tile + 1) * block_m, p.seqlen_q); ++i)
    for (int j = k_tile * block_n; j < (k_tile + 1) * block_n; ++j) (p.sees(i, j) ? any_visible : any_hidden) = true;
  if (!any_visible) return TileState::skipped;
  return any_hidden ? TileState::masked : TileState::computed;
}

struct Case {
  Problem problem;
  int block_m, block_n, group;
};

Case random_case(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int sizes[] = {16, 32, 64, 128};
  Case c;
  c.problem.seqlen_q = 2 * uniform(0, 200) + 1;  // odd: 1 .. 401
  c.problem.seqlen_k = 2 * uniform(0, 200) + 1;
  const int mode = uniform(0, 3);  // none, causal, window, causal with a window
  c.problem.causal = mode == 1 || mode == 3;
  c.problem.window = mode >= 2;
  // Sizes the spec does not use must not matter: without a window or causal mask the
  // kernel ignores both, and causal overrides the right edge.
  c.problem.left = mode == 1 ? -1 : uniform(-1, 300);
  c.problem.right = uniform(-1, 300);
  c.block_m = sizes[uniform(0, 3)];
  c.block_n = sizes[uniform(0, 3)];
  c.group = uniform(1, 3);
  return c;
}

KernelSpec spec_for(const Case& c, Pass pass) {
  KernelSpec s;
  s.pass = pass;
  s.block_m = c.block_m;
  s.block_n = c.block_n;
  s.causal = c.problem.causal;
  s.window = c.problem.window;
  return s;
}

ScheduleShape shape_for(const Case& c) {
  ScheduleShape shape;
  shape.seqlen_q = c.problem.seqlen_q;
  shape.seqlen_k = c.problem.seqlen_k;
  shape.window_left = c.problem.left;
  shape.window_right = c.problem.right;
  shape.group = c.group;
  return shape;
}

std::string describe(const Case& c) {
  return fmt::format("N={} M={} causal={} window={} left={} right={} block_m={} block_n={} group={}",
                     c.problem.seqlen_q, c.problem.seqlen_k, c.problem.causal, c.problem.window, c.problem.left,
                     c.problem.right, c.block_m, c.block_n, c.group);
}

// Every tile's state, and each CTA's loop: the non-skipped tiles of the Q row (fwd,
// dq) or K/V column (dkdv) it owns, in increasing order, repeated per group head.
void check_pass(const Case& c, Pass pass) {
  const PassSchedule s = schedule_pass(spec_for(c, pass), shape_for(c));
  const int q_tiles = (c.problem.seqlen_q + c.block_m - 1) / c.block_m;
  const int k_tiles = (c.problem.seqlen_k + c.block_n - 1) / c.block_n;
  ASSERT_EQ(s.q_tiles, q_tiles);
  ASSERT_EQ(s.k_tiles, k_tiles);
  for (int q = 0; q < q_tiles; ++q)
    for (int k = 0; k < k_tiles; ++k)
      ASSERT_EQ(s.state(q, k), brute_force_state(c.problem, c.block_m, c.block_n, q, k))
          << to_string(pass) << " tile (" << q << ", " << k << ")";

  const bool by_keys = pass == Pass::bwd_dkdv;
  ASSERT_EQ(static_cast<int>(s.ctas.size()), by_keys ? k_tiles : q_tiles);
  for (const CtaWork& cta : s.ctas) {
    // fwd and dq start the last (heaviest under causal) Q tile first.
    const int owned = by_keys ? cta.block_x : q_tiles - 1 - cta.block_x;
    ASSERT_EQ(cta.tile, owned);
    std::vector<TileVisit> expected;
    for (int head = 0; head < (by_keys ? c.group : 1); ++head)
      for (int t = 0; t < (by_keys ? q_tiles : k_tiles); ++t) {
        const int q = by_keys ? t : owned, k = by_keys ? owned : t;
        const TileState state = brute_force_state(c.problem, c.block_m, c.block_n, q, k);
        if (state == TileState::skipped) continue;
        TileVisit v;
        v.q_tile = q;
        v.k_tile = k;
        v.head = head;
        v.masked = state == TileState::masked;
        expected.push_back(v);
      }
    ASSERT_EQ(cta.visits.size(), expected.size()) << to_string(pass) << " CTA " << cta.block_x;
    for (size_t i = 0; i < expected.size(); ++i) {
      const TileVisit& got = cta.visits[i];
      EXPECT_EQ(got.q_tile, expected[i].q_tile) << to_string(pass) << " CTA " << cta.block_x << " step " << i;
      EXPECT_EQ(got.k_tile, expected[i].k_tile) << to_string(pass) << " CTA " << cta.block_x << " step " << i;
      EXPECT_EQ(got.head, expected[i].head) << to_string(pass) << " CTA " << cta.block_x << " step " << i;
      EXPECT_EQ(got.masked, expected[i].masked) << to_string(pass) << " CTA " << cta.block_x << " step " << i;
      EXPECT_EQ(got.masked, got.keys_past_end || got.window_edge);
      EXPECT_EQ(got.keys_past_end, (got.k_tile + 1) * c.block_n > c.problem.seqlen_k);
    }
  }
}

TEST(TileSchedule, MatchesBruteForceOverElements) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int n = 0; n < 150; ++n) {
    const Case c = random_case(rng);
    SCOPED_TRACE(describe(c));
    for (Pass pass : {Pass::fwd, Pass::bwd_dkdv, Pass::bwd_dq}) {
      check_pass(c, pass);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Causal with seqlen_q > seqlen_k: the first seqlen_q - seqlen_k queries see no key,
// so Q tiles made only of them are skipped whole (their lse is -inf).
TEST(TileSchedule, CausalSkipsQueriesAboveTheBottomRightDiagonal) {
  Case c{{301, 65, true, false, -1, -1}, 64, 32, 1};
  const PassSchedule s = schedule_pass(spec_for(c, Pass::fwd), shape_for(c));
  for (int q = 0; q < 3; ++q)  // queries 0..191 < 301 - 65 = 236 see nothing
    for (int k = 0; k < s.k_tiles; ++k) EXPECT_EQ(s.state(q, k), TileState::skipped) << q << ", " << k;
  EXPECT_EQ(s.state(3, 0), TileState::masked);  // query 255 sees keys 0..19
  EXPECT_EQ(s.state(3, 1), TileState::skipped);
  // CTA #1 owns the last Q tile (queries 256..300, keys up to 20..64): K/V tiles 0, 1, 2.
  const CtaWork& first = s.ctas[0];
  ASSERT_EQ(first.tile, 4);
  ASSERT_EQ(first.visits.size(), 3u);
  EXPECT_TRUE(first.visits[0].window_edge);
  EXPECT_FALSE(first.visits[0].keys_past_end);
  EXPECT_TRUE(first.visits[2].keys_past_end);         // keys 64..95, seqlen_k 65
  EXPECT_TRUE(s.ctas[s.q_tiles - 1].visits.empty());  // the CTA of Q tile 0 starts last and loops over nothing
}

TEST(TileSchedule, RowBlockPassesCoverThePaddedRows) {
  KernelSpec spec;
  spec.pass = Pass::bwd_preprocess;
  spec.block_m = 64;
  ScheduleShape shape;
  shape.seqlen_q = 131;  // padded to 256 rows: 4 CTAs, the last on padding only
  shape.seqlen_k = 7;
  const PassSchedule s = schedule_pass(spec, shape);
  ASSERT_EQ(s.ctas.size(), 4u);
  EXPECT_EQ(s.ctas[2].row_begin, 128);
  EXPECT_EQ(s.ctas[2].row_end, 131);
  EXPECT_EQ(s.ctas[3].row_begin, s.ctas[3].row_end);
  EXPECT_TRUE(s.states.empty());
}

// 10^8 x 10^8 would be 6 x 10^11 tile visits: refused by the tile count, before allocating.
TEST(TileSchedule, RejectsMoreTilesThanTheLimitBeforeAllocating) {
  KernelSpec spec;
  ScheduleShape shape;
  shape.seqlen_q = shape.seqlen_k = 100000000;
  try {
    schedule_pass(spec, shape);
    FAIL() << "10^8 x 10^8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("expected at most {} tiles", kMaxScheduleTiles)),
              std::string::npos)
        << e.what();
  }
}

TEST(TileSchedule, RejectsShapesOutOfRange) {
  KernelSpec spec;
  ScheduleShape shape;
  shape.seqlen_q = 0;
  shape.seqlen_k = 10;
  EXPECT_THROW(schedule_pass(spec, shape), Error);
  shape.seqlen_q = 10;
  shape.window_left = -2;
  try {
    schedule_pass(spec, shape);
    FAIL() << "window_left -2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window_left"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashgen
