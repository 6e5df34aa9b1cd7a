// The single-tile scheduler's CTA order (templates/scheduler/single_tile.cuh), run on the
// emulator's grid builtins: with L2 sections every launch rank gets a distinct tile, each
// section's slices go block by block (the heaviest causal tiles of all its slices first), and
// sections follow one another; without, the grid's own order.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "sm80_emulator.h"
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
