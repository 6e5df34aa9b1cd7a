// The single-tile scheduler's CTA order (templates/scheduler/single_tile.cuh), run on the
// emulator's grid builtins: with L2 sections every launch rank gets a distinct tile, each
// section's slices go block by block (the heaviest causal tiles of all its slices first), and
// sections follow one another; without, the grid's own order.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "sm80_emulator.h"
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
