// The split-KV decode's split count (runtime/launch_plan.cpp, split_count) on the decode rows
// of docs/perf.md, planned without a GPU: the count the SM balance gives, the caller's
// num_splits filled to whole key tiles, and a paged cache split as its dense twin is.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/kernel_selection.h"
#include "runtime/launch_plan.h"

namespace flashgen {
namespace {

// B x seqlen_q x seqlen_k, 32 query heads over 8 KV heads, d128, bf16; paged: pages of 16.
Problem decode(long long batch, long long seqlen_q, long long seqlen_k, bool paged = false) {
  Problem p;
  p.batch = batch, p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k;
  p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.dtype = DType::bf16, p.device = 0;
  p.paged = paged;
  if (paged) p.page_size = 16, p.max_pages_per_seq = seqlen_k / 16, p.num_pages = batch * p.max_pages_per_seq;
  p.options.softmax_scale = 0.088f;
  return p;
}

std::vector<KernelSpec> specs_of(const Problem& p) { return select_forward_kernels(problem_key(p), Arch::sm_90a); }

TEST(SplitCount, BalancesOverTheSmsAndHonoursTheCallersCount) {
  const Problem big_batch = decode(64, 1, 8192);  // 512 CTAs: no split
  EXPECT_EQ(split_count(big_batch, specs_of(big_batch), 132), 1);
  const Problem one = decode(1, 1, 262144);  // 8 CTAs over 132 SMs
  EXPECT_EQ(split_count(one, specs_of(one), 132), 16);  // 8 CTAs x 16 = 128 of 132 SMs
  Problem forced = one;
  forced.num_splits = 7;
  EXPECT_EQ(split_count(forced, specs_of(forced), 132), 7);
  forced.num_splits = 1;
  EXPECT_EQ(split_count(forced, specs_of(forced), 132), 1);
  Problem short_keys = decode(1, 1, 300);  // 5 key tiles of 64: 128 asked for give 5 of 1
  short_keys.num_splits = 128;
  ASSERT_EQ(specs_of(short_keys).at(0).block_n, 64);
  EXPECT_EQ(split_count(short_keys, specs_of(short_keys), 132), 5);
}

TEST(SplitCount, PagedCachesBalanceOverTheSmsAsDenseOnesDo) {
  // Speculative decoding: 16 positions x 4 heads = 64 rows, one 64x128 tile per KV head: 64
  // CTAs of 144 KB shared memory, one per SM: 2 splits fill the 132 SMs once.
  const Problem p = decode(8, 16, 16384, true);
  const std::vector<KernelSpec> specs = specs_of(p);
  ASSERT_EQ(specs.at(0).block_m, 64);
  EXPECT_EQ(split_count(p, specs, 132), 2);
  // One query per sequence: 16-row tiles, two fit an SM, yet the work is balanced over the
  // SMs as for the dense cache (the page lookups run a tile ahead): B = 1 over 256k keys
  // takes 16 splits (8 x 16 CTAs on 132 SMs), B = 8 over 64k keys 2 (64 x 2 CTAs), not the
  // 33 and 4 that filling both slots of every SM would give.
  const Problem one = decode(1, 1, 262144, true);
  const Problem one_dense = decode(1, 1, 262144);
  ASSERT_EQ(specs_of(one).at(0).block_m, 16);
  EXPECT_EQ(split_count(one, specs_of(one), 132), split_count(one_dense, specs_of(one_dense), 132));
  EXPECT_EQ(split_count(one, specs_of(one), 132), 16);
  const Problem eight = decode(8, 1, 65536, true);
  EXPECT_EQ(split_count(eight, specs_of(eight), 132), 2);
  // A batch that fills 80 % of the CTA slots unsplit stays unsplit.
  const Problem full = decode(64, 1, 8192, true);
  EXPECT_EQ(split_count(full, specs_of(full), 132), 1);
}

}  // namespace
}  // namespace flashgen
