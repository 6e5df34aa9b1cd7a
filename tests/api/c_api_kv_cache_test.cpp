// The C API's forward over a KV cache on CPU tensors, many random caches: every buffer is a
// heap block of exactly its bytes (ASan, in the sanitizer CI step, flags a read past it),
// pages shuffled with NaN in rows no sequence owns, random page sizes and key counts (0 and
// full included), against the per-sequence oracle; then a bad index (a page outside the
// cache, a key count past the table) must be refused with outputs untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "c_api_support.h"
#include "flashgen/flashgen.h"
#include "tests/cpu/kv_cache_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

// A heap copy of exactly `v`'s bytes.
template <typename T>
std::unique_ptr<T[]> exact_copy(const std::vector<T>& v) {
  auto out = std::make_unique<T[]>(v.size());
  std::memcpy(out.get(), v.data(), v.size() * sizeof(T));
  return out;
}

using CApiKvCache = CApiRuntimeTest;

TEST_F(CApiKvCache, RandomPagedCachesMatchTheOracleAndBadIndicesAreRefused) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::normal_distribution<float> normal;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int round = 0; round < 60; ++round) {
    const int batch = uniform(1, 4), heads_kv = uniform(1, 2), heads_q = heads_kv * uniform(1, 3);
    const int head_dim = uniform(1, 40), seqlen_q = uniform(1, 5), capacity = uniform(1, 70);
    const bool paged = round % 4 != 3, per_sequence = round % 3 != 2;
    const int page_size = uniform(1, 20);
    SCOPED_TRACE(::testing::Message() << "round " << round << ": batch " << batch << " heads " << heads_q << "x"
                                      << heads_kv << " d" << head_dim << " q" << seqlen_q << " capacity " << capacity
                                      << (paged ? " page " : " dense") << (paged ? page_size : 0));
    const std::int64_t row = static_cast<std::int64_t>(heads_kv) * head_dim;
    std::vector<float> q(static_cast<std::size_t>(batch) * seqlen_q * heads_q * head_dim);
    std::vector<float> k(static_cast<std::size_t>(batch * capacity * row)), v(k.size());
    for (auto* t : {&q, &k, &v})
      for (float& x : *t) x = normal(rng);
    std::vector<int> lengths(static_cast<std::size_t>(batch), capacity);
    if (per_sequence)
      for (int& n : lengths) n = uniform(0, capacity);
    PagedCache cache;
    std::vector<std::int64_t> kv_shape{batch, capacity, heads_kv, head_dim};
    if (paged) {
      // Without key counts a paged sequence is its whole pages (the capacity rounded up): the
      // rows past the capacity are then keys too, finite ones.
      cache = make_paged_cache(k, v, batch, capacity, row, lengths, page_size, rng, per_sequence ? nan : 0.5f);
      kv_shape = {cache.num_pages, page_size, heads_kv, head_dim};
    }
    auto q_block = exact_copy(q), k_block = exact_copy(paged ? cache.k : k), v_block = exact_copy(paged ? cache.v : v);
    auto table_block = exact_copy(cache.table.empty() ? std::vector<std::int32_t>{0} : cache.table);
    auto used_block = exact_copy(std::vector<std::int32_t>(lengths.begin(), lengths.end()));
    std::vector<float> o(q.size(), nan), lse(static_cast<std::size_t>(batch) * heads_q * seqlen_q, nan);
    auto o_block = exact_copy(o), lse_block = exact_copy(lse);

    flashgen_forward_args a;
    flashgen_forward_args_init(&a);
    a.q = view(q_block.get(), FLASHGEN_F32, {batch, seqlen_q, heads_q, head_dim});
    a.k = view(k_block.get(), FLASHGEN_F32, kv_shape);
    a.v = view(v_block.get(), FLASHGEN_F32, kv_shape);
    a.o = view(o_block.get(), FLASHGEN_F32, {batch, seqlen_q, heads_q, head_dim});
    a.lse = view(lse_block.get(), FLASHGEN_F32, {batch, heads_q, seqlen_q});
    a.options.causal = round % 2;
    if (paged) a.block_table = view(table_block.get(), FLASHGEN_INT32, {batch, cache.max_pages});
    if (per_sequence) a.seqused_k = view(used_block.get(), FLASHGEN_INT32, {batch});
    a.num_splits = 129;  // one more than split-KV takes
    EXPECT_EQ(flashgen_forward(runtime_, &a, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(flashgen_last_error(), HasSubstr("num_splits: is 129, expected 0 (automatic), 1 (unsplit) or 2..128"));
    a.num_splits = uniform(0, 128);  // any count: the CPU's result is the exact one
    ASSERT_EQ(flashgen_forward(runtime_, &a, nullptr), FLASHGEN_OK) << flashgen_last_error();

    // The oracle over the dense cache; without key counts a paged sequence holds its pages.
    const std::int64_t keys = paged && !per_sequence ? cache.max_pages * page_size : capacity;
    std::vector<double> kd(static_cast<std::size_t>(batch * keys * row), 0.0), vd(kd.size(), 0.0);
    if (paged && !per_sequence) {  // the dense view of the whole pages
      for (int b = 0; b < batch; ++b)
        for (std::int64_t j = 0; j < keys; ++j) {
          const std::int64_t page = cache.table[b * cache.max_pages + j / page_size];
          const std::size_t src = static_cast<std::size_t>((page * page_size + j % page_size) * row);
          std::copy_n(cache.k.begin() + src, row, kd.begin() + (b * keys + j) * row);
          std::copy_n(cache.v.begin() + src, row, vd.begin() + (b * keys + j) * row);
        }
      std::fill(lengths.begin(), lengths.end(), static_cast<int>(keys));
    } else {
      std::copy(k.begin(), k.end(), kd.begin());
      std::copy(v.begin(), v.end(), vd.begin());
    }
    Problem p;
    p.batch = batch, p.seqlen_q = seqlen_q, p.seqlen_k = keys, p.heads_q = heads_q, p.heads_kv = heads_kv;
    p.head_dim = head_dim, p.dtype = DType::f32;
    p.options.causal = a.options.causal;
    p.options.window_right = a.options.causal ? 0 : -1;
    p.options.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const cpu::Fp64Outputs ref = kv_cache_oracle(p, {q.begin(), q.end()}, kd, vd, lengths, 1);
    for (std::size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(o_block[i], ref.o[i], 1e-4) << "o[" << i << "]";
    for (std::size_t i = 0; i < lse.size(); ++i)
      if (std::isinf(ref.lse[i]))
        ASSERT_TRUE(std::isinf(lse_block[i]) && lse_block[i] < 0) << "lse[" << i << "]";
      else
        ASSERT_NEAR(lse_block[i], ref.lse[i], 1e-4) << "lse[" << i << "]";

    // A bad index: refused by name, outputs untouched.
    std::fill_n(o_block.get(), q.size(), nan);
    if (paged && per_sequence && lengths[0] > 0) {
      table_block[static_cast<std::size_t>(uniform(0, (lengths[0] - 1) / page_size))] =
          uniform(0, 1) ? -1 : static_cast<std::int32_t>(cache.num_pages);
      EXPECT_EQ(flashgen_forward(runtime_, &a, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
      EXPECT_THAT(flashgen_last_error(), HasSubstr("block_table: element [0, "));
    } else if (per_sequence) {
      used_block[0] = uniform(0, 1) ? -1 : static_cast<std::int32_t>((paged ? cache.max_pages * page_size : capacity) + 1);
      EXPECT_EQ(flashgen_forward(runtime_, &a, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
      EXPECT_THAT(flashgen_last_error(), HasSubstr("seqused_k: element [0] is"));
    } else {
      continue;
    }
    for (std::size_t i = 0; i < q.size(); ++i) ASSERT_TRUE(std::isnan(o_block[i])) << "a refused call wrote o[" << i << "]";
  }
}

}  // namespace
}  // namespace flashgen::test
