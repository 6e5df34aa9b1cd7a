// The tile schedulers (templates/scheduler/) run on the emulator's grid builtins. The
// single-tile scheduler's CTA order: with L2 sections every launch rank gets a distinct tile,
// each section's slices go block by block (the heaviest causal tiles of all its slices first),
// and sections follow one another; without, the grid's own order. The persistent scheduler's
// walks: every tile once over all CTAs; unmasked the grid's order in strides, masked the
// single-tile grid's longest-first order in snake rounds, which balance causal work.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "compiler/tile_schedule.h"
#include "sm80_emulator.h"
#include "scheduler/persistent.cuh"
#include "scheduler/section_grid.cuh"
#include "scheduler/single_tile.cuh"

namespace {

struct Tile {
  int block, head, batch;
};

// The tiles the CTAs of a (blocks, heads, batches) grid take, in launch rank order.
template <bool kReverse>
std::vector<Tile> tiles_by_rank(unsigned blocks, unsigned heads, unsigned batches, int section) {
  FlashAttentionParams p{};
  p.tile_section = section;
  gridDim = {blocks, heads, batches};
  std::vector<Tile> out;
  for (unsigned z = 0; z < batches; ++z)
    for (unsigned y = 0; y < heads; ++y)
      for (unsigned x = 0; x < blocks; ++x) {
        blockIdx = {x, y, z};
        const flash::WorkTile w = flash::SingleTileScheduler<kReverse>::first(p);
        EXPECT_TRUE(w.valid);
        out.push_back({w.block, w.head, w.batch});
      }
  return out;
}

TEST(SingleTileScheduler, SectionsTakeEveryTileOnceBlockByBlock) {
  for (unsigned blocks : {1u, 3u, 8u})
    for (unsigned heads : {1u, 5u})
      for (unsigned batches : {1u, 3u})
        for (int section : {2, 4, 7, 64}) {
          SCOPED_TRACE(testing::Message() << blocks << " blocks, " << heads << " heads, " << batches
                                          << " batches, section " << section);
          const std::vector<Tile> order = tiles_by_rank<false>(blocks, heads, batches, section);
          std::set<std::tuple<int, int, int>> seen;
          for (const Tile& t : order) {
            ASSERT_GE(t.block, 0);
            ASSERT_LT(t.block, static_cast<int>(blocks));
            ASSERT_LT(t.head, static_cast<int>(heads));
            ASSERT_LT(t.batch, static_cast<int>(batches));
            seen.insert({t.block, t.head, t.batch});
          }
          EXPECT_EQ(seen.size(), order.size()) << "a tile taken twice";
          // Rank by rank: the section (slice / section) never decreases, and within it the
          // block never decreases, while the slices of one block cycle in order.
          const unsigned s = static_cast<unsigned>(section);
          for (size_t i = 1; i < order.size(); ++i) {
            const unsigned slice0 = order[i - 1].head + heads * order[i - 1].batch;
            const unsigned slice1 = order[i].head + heads * order[i].batch;
            ASSERT_LE(slice0 / s, slice1 / s) << "rank " << i;
            if (slice0 / s == slice1 / s) {
              ASSERT_LE(order[i - 1].block, order[i].block) << "rank " << i;
              if (order[i - 1].block == order[i].block) {
                ASSERT_EQ(slice1, slice0 + 1) << "rank " << i;
              }
            }
          }
        }
}

TEST(SingleTileScheduler, NoSectionIsTheGridOrderAndReverseFlipsBlocks) {
  for (int section : {0, 1}) {
    const std::vector<Tile> order = tiles_by_rank<false>(4, 3, 2, section);
    const std::vector<Tile> reversed = tiles_by_rank<true>(4, 3, 2, section);
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i].block, static_cast<int>(i % 4));
      EXPECT_EQ(order[i].head, static_cast<int>(i / 4 % 3));
      EXPECT_EQ(order[i].batch, static_cast<int>(i / 12));
      EXPECT_EQ(reversed[i].block, 3 - order[i].block);
    }
  }
  // With sections the reverse scheduler starts from the last block of each slice.
  const std::vector<Tile> reversed = tiles_by_rank<true>(4, 3, 2, 6);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(reversed[i].block, 3);
  EXPECT_EQ(reversed.back().block, 0);
}

}  // namespace

// The dK/dV section grid (templates/scheduler/section_grid.cuh), launched as the plan shapes it
// ((slices per section, blocks, sections), the last section possibly short): every tile once,
// the extra CTAs of a short section invalid, and in launch order each section's slices block by
// block.
TEST(SectionGridScheduler, EveryTileOnceBlockByBlockWithinSections) {
  for (int blocks : {1, 4})
    for (int heads : {1, 3})
      for (int batches : {1, 5})
        for (int section : {1, 2, 4, 15}) {
          SCOPED_TRACE(testing::Message() << blocks << " blocks, " << heads << " heads, " << batches
                                          << " batches, section " << section);
          FlashAttentionParams p{};
          p.heads_kv = heads;
          p.batch = batches;
          const int slices = heads * batches;
          const unsigned sections = static_cast<unsigned>((slices + section - 1) / section);
          gridDim = {static_cast<unsigned>(section), static_cast<unsigned>(blocks), sections};
          std::set<std::tuple<int, int, int>> seen;
          int last_section = 0, last_block = 0, invalid = 0;
          for (unsigned z = 0; z < sections; ++z)
            for (unsigned y = 0; y < static_cast<unsigned>(blocks); ++y)
              for (unsigned x = 0; x < static_cast<unsigned>(section); ++x) {
                blockIdx = {x, y, z};
                const flash::WorkTile w = flash::SectionGridScheduler::first(p);
                if (!w.valid) {
                  ++invalid;
                  continue;
                }
                ASSERT_LT(w.head, heads);
                ASSERT_LT(w.batch, batches);
                ASSERT_LT(w.block, blocks);
                seen.insert({w.block, w.head, w.batch});
                const int sec = (w.head + heads * w.batch) / section;
                ASSERT_GE(sec, last_section);
                if (sec == last_section) {
                  ASSERT_GE(w.block, last_block);
                }
                last_section = sec;
                last_block = w.block;
              }
          EXPECT_EQ(seen.size(), static_cast<size_t>(blocks * slices)) << "a tile missed or taken twice";
          EXPECT_EQ(invalid, static_cast<int>(sections * section - slices) * blocks);
        }
}

namespace {

// The walk of the CTA the grid builtins name, of StaticPersistentScheduler<kBlockM, kLongestFirst>
// (a walk that never ends stops past 100,000 tiles and fails the caller's checks).
template <int kBlockM, bool kLongestFirst>
std::vector<flash::WorkTile> persistent_walk_of(const FlashAttentionParams& p) {
  using S = flash::StaticPersistentScheduler<kBlockM, kLongestFirst>;
  std::vector<flash::WorkTile> out;
  for (flash::WorkTile w = S::first(p); w.valid && out.size() <= 100000; w = S::next(p, w)) out.push_back(w);
  return out;
}

// The walk of CTA `cta` of `ctas` on 64-row tiles.
template <bool kLongestFirst>
std::vector<flash::WorkTile> persistent_walk(const FlashAttentionParams& p, unsigned ctas, unsigned cta) {
  gridDim = {ctas, 1, 1};
  blockIdx = {cta, 0, 0};
  return persistent_walk_of<64, kLongestFirst>(p);
}

FlashAttentionParams grid_params(int seqlen_q, int heads, int batch, int section) {
  FlashAttentionParams p{};
  p.seqlen_q = seqlen_q;
  p.heads_q = heads;
  p.batch = batch;
  p.tile_section = section;
  return p;
}

TEST(StaticPersistentScheduler, UnmaskedCtasStrideOverTheGridOrder) {
  const FlashAttentionParams p = grid_params(300, 3, 2, 1);  // 5 blocks of 64 x 6 slices = 30 tiles
  for (unsigned ctas : {1u, 7u, 30u, 41u})
    for (unsigned cta = 0; cta < ctas; ++cta) {
      const std::vector<flash::WorkTile> walk = persistent_walk<false>(p, ctas, cta);
      for (size_t k = 0; k < walk.size(); ++k) {
        const int rank = static_cast<int>(cta + k * ctas);
        EXPECT_EQ(walk[k].block, rank % 5);
        EXPECT_EQ(walk[k].head, rank / 5 % 3);
        EXPECT_EQ(walk[k].batch, rank / 15);
      }
      EXPECT_EQ(walk.size(), cta < 30 ? (30 - cta + ctas - 1) / ctas : 0u) << ctas << " CTAs, CTA " << cta;
    }
}

// The longest-first order over all slices: rank r is block blocks - 1 - r / slices of slice
// r % slices (slice = head + heads * batch).
TEST(StaticPersistentScheduler, MaskedTakesEveryTileOnceInSnakeRoundsLongestFirst) {
  for (int seqlen : {64, 200, 1000})
    for (int heads : {1, 3})
      for (int batch : {1, 2})
        for (int section : {0, 4})  // the single-tile grid's sections: not read
          for (unsigned ctas : {1u, 5u, 16u, 132u}) {
            SCOPED_TRACE(testing::Message() << "seqlen " << seqlen << ", " << heads << " heads, " << batch
                                            << " batches, section " << section << ", " << ctas << " CTAs");
            const FlashAttentionParams p = grid_params(seqlen, heads, batch, section);
            const int blocks = (seqlen + 63) / 64, slices = heads * batch;
            std::set<std::tuple<int, int, int>> seen;
            for (unsigned cta = 0; cta < ctas; ++cta) {
              const std::vector<flash::WorkTile> walk = persistent_walk<true>(p, ctas, cta);
              for (size_t k = 0; k < walk.size(); ++k) {
                const int rank = static_cast<int>(k * ctas + (k % 2 ? ctas - 1 - cta : cta));
                ASSERT_LT(rank, blocks * slices);
                EXPECT_EQ(walk[k].block, blocks - 1 - rank / slices) << "CTA " << cta << ", round " << k;
                EXPECT_EQ(walk[k].head + heads * walk[k].batch, rank % slices) << "CTA " << cta << ", round " << k;
                seen.insert({walk[k].block, walk[k].head, walk[k].batch});
              }
            }
            EXPECT_EQ(seen.size(), static_cast<size_t>(blocks * slices)) << "a tile missed or taken twice";
          }
}

// Under a causal mask (seqlen_q == seqlen_k) query block b costs b + 1 key blocks. The snake
// keeps every CTA within one round's spread of the mean, where CTAs striding over the same
// order would take the heaviest tile of every round in turn (CTA 0 each time).
TEST(StaticPersistentScheduler, SnakeRoundsBalanceCausalWork) {
  struct Shape {
    int seqlen, heads, batch;
    double most;  // the busiest CTA's work over the mean, at most
  };
  // d128 at 16k (128 query blocks of 16 heads: here 64-row blocks of 8k, the same counts), at
  // 4k (32 blocks, 16 heads, 4 batches), and one head of 1k (16 tiles on 16 CTAs, as balanced as
  // whole tiles allow). Snake 1.002 and 1.000 of the mean; strides 1.063 and 1.063.
  for (const Shape& s : {Shape{8192, 16, 1, 1.005}, Shape{2048, 16, 4, 1.005}, Shape{1024, 1, 1, 16.0 / 8.5}}) {
    SCOPED_TRACE(testing::Message() << "seqlen " << s.seqlen << ", " << s.heads << " heads, " << s.batch << " batches");
    const FlashAttentionParams p = grid_params(s.seqlen, s.heads, s.batch, 0);
    const int blocks = s.seqlen / 64, slices = s.heads * s.batch;
    const unsigned ctas = static_cast<unsigned>(std::min(132, blocks * slices));  // as the launch plan
    std::vector<long long> snake(ctas), stride(ctas);
    for (unsigned cta = 0; cta < ctas; ++cta) {
      for (const flash::WorkTile& w : persistent_walk<true>(p, ctas, cta)) snake[cta] += w.block + 1;
      for (int r = static_cast<int>(cta); r < blocks * slices; r += static_cast<int>(ctas))
        stride[cta] += blocks - r / slices;
    }
    const double total = std::accumulate(snake.begin(), snake.end(), 0.0);
    EXPECT_EQ(total, slices * blocks * (blocks + 1) / 2.0);
    const double mean = total / ctas;
    const double snake_max = *std::max_element(snake.begin(), snake.end());
    const double stride_max = *std::max_element(stride.begin(), stride.end());
    EXPECT_LE(snake_max / mean, s.most) << "stride: " << stride_max / mean;
    EXPECT_LE(snake_max, stride_max);
  }
}

// `flashgen dump --emit schedule` draws the persistent walk from its host mirror
// (compiler/tile_schedule.cpp, persistent_seat): for the first slice's tiles, the CTA and the
// round it names are the ones the kernel's scheduler takes, unmasked and masked, on launches
// of fewer CTAs than tiles and of more.
TEST(StaticPersistentScheduler, TheDumpDrawsTheWalkTheKernelTakes) {
  struct Shape {
    int seqlen, heads;
    unsigned sms;
  };
  for (bool masked : {false, true})
    for (const Shape& sh : {Shape{1000, 3, 5}, Shape{2048, 16, 132}, Shape{300, 1, 132}, Shape{4096, 2, 7}}) {
      SCOPED_TRACE(testing::Message() << (masked ? "causal" : "unmasked") << ", seqlen " << sh.seqlen << ", "
                                      << sh.heads << " heads, " << sh.sms << " SMs");
      flashgen::KernelSpec spec;
      spec.pass = flashgen::Pass::fwd;
      spec.head_dim = 128;
      spec.block_m = 128;
      spec.block_n = 128;
      spec.warps = 12;
      spec.arch = flashgen::Arch::sm_90a;
      spec.persistent = true;
      spec.causal = masked;
      flashgen::ScheduleShape shape;
      shape.seqlen_q = shape.seqlen_k = sh.seqlen;
      shape.window_right = masked ? 0 : -1;
      shape.slices = sh.heads;
      shape.ctas = static_cast<int>(sh.sms);
      const flashgen::PassSchedule drawn = flashgen::schedule_pass(spec, shape);
      ASSERT_EQ(drawn.ctas.size(), static_cast<size_t>(drawn.q_tiles));

      const FlashAttentionParams p = grid_params(sh.seqlen, sh.heads, 1, 0);
      const unsigned tiles = static_cast<unsigned>(drawn.q_tiles * sh.heads);
      const unsigned ctas = std::min(sh.sms, tiles);  // as the launch plan
      EXPECT_EQ(drawn.persistent_ctas, ctas);
      std::vector<std::pair<int, int>> seat(drawn.q_tiles, {-1, -1});  // head 0's block -> (CTA, round)
      for (unsigned cta = 0; cta < ctas; ++cta) {
        gridDim = {ctas, 1, 1};
        blockIdx = {cta, 0, 0};
        using Walk = std::vector<flash::WorkTile>;
        const Walk walk = masked ? Walk(persistent_walk_of<128, true>(p)) : Walk(persistent_walk_of<128, false>(p));
        for (size_t k = 0; k < walk.size(); ++k)
          if (walk[k].head == 0 && walk[k].batch == 0) seat[walk[k].block] = {static_cast<int>(cta), static_cast<int>(k)};
      }
      for (const flashgen::CtaWork& w : drawn.ctas) {
        EXPECT_EQ(w.block_x, seat[w.tile].first) << "Q tile " << w.tile;
        EXPECT_EQ(w.round, seat[w.tile].second) << "Q tile " << w.tile;
      }
    }
}

}  // namespace
