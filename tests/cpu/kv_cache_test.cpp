// The CPU backend's forward over a KV cache (runtime/cpu/kv_cache_forward.cpp) against the
// fp64 oracle run one sequence at a time on the dense cache (kv_cache_reference.h): paged
// caches of several page sizes with shuffled pages and NaN in rows no sequence owns,
// per-sequence key counts including 0, options; and the indices it must refuse.
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "kv_cache_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

struct Cache {
  int batch = 4, seqlen_q = 3, capacity = 50, heads_q = 4, heads_kv = 2, head_dim = 24;
  int page_size = 7;  // 0: dense
  bool causal = false;
  int window_left = -1;
  float softcap = 0.0f;
};

struct Call {
  std::vector<float> q, k, v, o, lse;
  std::vector<int> lengths;
  PagedCache paged;
  ForwardArgs args;
  Problem dense;  // the dense problem the oracle runs
};

Call make_call(const Cache& c, std::mt19937& rng) {
  Call x;
  std::normal_distribution<float> dist;
  const std::int64_t row = static_cast<std::int64_t>(c.heads_kv) * c.head_dim;
  x.q.resize(static_cast<std::size_t>(c.batch) * c.seqlen_q * c.heads_q * c.head_dim);
  x.k.resize(static_cast<std::size_t>(c.batch * c.capacity * row));
  x.v.resize(x.k.size());
  for (auto* t : {&x.q, &x.k, &x.v})
    for (float& e : *t) e = dist(rng);
  x.lengths = {0, 1, c.capacity, std::uniform_int_distribution<int>(1, c.capacity)(rng)};
  x.lengths.resize(static_cast<std::size_t>(c.batch), c.capacity);
  const std::array<std::int64_t, 4> q_shape{c.batch, c.seqlen_q, c.heads_q, c.head_dim};
  std::array<std::int64_t, 4> kv_shape{c.batch, c.capacity, c.heads_kv, c.head_dim};
  x.o.assign(x.q.size(), std::numeric_limits<float>::quiet_NaN());
  x.lse.assign(static_cast<std::size_t>(c.batch) * c.heads_q * c.seqlen_q, std::numeric_limits<float>::quiet_NaN());
  ForwardArgs& a = x.args;
  a.q = Tensor::contiguous(x.q.data(), DType::f32, q_shape);
  a.k = Tensor::contiguous(x.k.data(), DType::f32, kv_shape);
  a.v = Tensor::contiguous(x.v.data(), DType::f32, kv_shape);
  if (c.page_size > 0) {
    x.paged = make_paged_cache(x.k, x.v, c.batch, c.capacity, row, x.lengths, c.page_size, rng,
                               std::numeric_limits<float>::quiet_NaN());
    kv_shape = {x.paged.num_pages, c.page_size, c.heads_kv, c.head_dim};
    a.k = Tensor::contiguous(x.paged.k.data(), DType::f32, kv_shape);
    a.v = Tensor::contiguous(x.paged.v.data(), DType::f32, kv_shape);
    a.block_table = Tensor::contiguous(x.paged.table.data(), DType::i32, {c.batch, x.paged.max_pages, 1, 1});
    a.block_table.rank = 2;
  }
  a.seqused_k = Tensor::contiguous(x.lengths.data(), DType::i32, {c.batch, 1, 1, 1});
  a.seqused_k.rank = 1;
  a.o = Tensor::contiguous(x.o.data(), DType::f32, q_shape);
  a.lse = Tensor::contiguous3(x.lse.data(), DType::f32, {c.batch, c.heads_q, c.seqlen_q});
  a.options.causal = c.causal;
  a.options.window_left = c.window_left;
  a.options.softcap = c.softcap;
  Problem& p = x.dense;
  p.batch = c.batch, p.seqlen_q = c.seqlen_q, p.seqlen_k = c.capacity, p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv, p.head_dim = c.head_dim, p.dtype = DType::f32;
  p.options = a.options;
  p.options.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.causal) p.options.window_right = 0;
  return x;
}

// The call is refused as invalid_argument with `message` in its text.
void expect_error(const ForwardArgs& a, const std::string& message) {
  try {
    Runtime().forward(a);
    ADD_FAILURE() << "accepted; expected " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
}

class KvCacheCpu : public ::testing::TestWithParam<Cache> {};

TEST_P(KvCacheCpu, ForwardMatchesTheOracle) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  Call x = make_call(GetParam(), rng);
  Runtime rt;
  rt.forward(x.args);
  const cpu::Fp64Outputs ref = kv_cache_oracle(x.dense, {x.q.begin(), x.q.end()}, {x.k.begin(), x.k.end()},
                                               {x.v.begin(), x.v.end()}, x.lengths, 1);
  for (std::size_t i = 0; i < x.o.size(); ++i) ASSERT_NEAR(x.o[i], ref.o[i], 1e-5) << "o[" << i << "]";
  for (std::size_t i = 0; i < x.lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_TRUE(std::isinf(x.lse[i]) && x.lse[i] < 0) << "lse[" << i << "] of a sequence without keys";
    } else {
      ASSERT_NEAR(x.lse[i], ref.lse[i], 1e-5) << "lse[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, KvCacheCpu,
                         ::testing::Values(Cache{}, Cache{.page_size = 1}, Cache{.page_size = 16, .causal = true},
                                           Cache{.capacity = 64, .page_size = 64, .window_left = 9, .softcap = 20.0f},
                                           Cache{.seqlen_q = 20, .page_size = 0, .causal = true}));

// Packed queries over the cache (ForwardArgs::varlen with cu_seqlens_k null): sequence b has
// query_rows[b] rows of the packed q, which starts with a row no sequence owns and ends with
// another; o and lse there must stay as they were.
struct PackedCall {
  Call x;
  std::vector<int> cu_q;
  std::int64_t total_q = 0;
};

PackedCall make_packed_call(const Cache& c, const std::vector<int>& query_rows, std::mt19937& rng) {
  PackedCall pc{make_call(c, rng), {}, 0};
  Call& x = pc.x;
  pc.cu_q = {1};
  for (int n : query_rows) pc.cu_q.push_back(pc.cu_q.back() + n);
  pc.total_q = pc.cu_q.back() + 1;
  const std::int64_t total = pc.total_q;
  x.q.resize(static_cast<std::size_t>(total * c.heads_q * c.head_dim));
  std::normal_distribution<float> dist;
  for (float& e : x.q) e = dist(rng);
  x.o.assign(x.q.size(), std::numeric_limits<float>::quiet_NaN());
  x.lse.assign(static_cast<std::size_t>(c.heads_q * total), std::numeric_limits<float>::quiet_NaN());
  ForwardArgs& a = x.args;
  a.q = Tensor::contiguous3(x.q.data(), DType::f32, {total, c.heads_q, c.head_dim});
  a.o = Tensor::contiguous3(x.o.data(), DType::f32, {total, c.heads_q, c.head_dim});
  a.lse = Tensor::contiguous(x.lse.data(), DType::f32, {c.heads_q, total, 1, 1});
  a.lse.rank = 2;
  a.varlen.cu_seqlens_q = Tensor::contiguous(pc.cu_q.data(), DType::i32, {static_cast<std::int64_t>(pc.cu_q.size()), 1, 1, 1});
  a.varlen.cu_seqlens_q.rank = 1;
  a.varlen.max_seqlen_q = *std::max_element(query_rows.begin(), query_rows.end());
  return pc;
}

TEST(KvCacheCpu, PackedQueriesMatchTheOracle) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  // Key counts {0, 1, capacity, random}: queries without keys, prefill chunks and decode steps.
  for (const Cache& c : {Cache{}, Cache{.page_size = 0, .causal = true}, Cache{.page_size = 16, .causal = true},
                         Cache{.page_size = 1, .window_left = 3, .softcap = 10.0f}}) {
    SCOPED_TRACE(::testing::Message() << "page_size " << c.page_size << " causal " << c.causal);
    PackedCall pc = make_packed_call(c, {2, 0, 6, 1}, rng);
    Call& x = pc.x;
    Runtime().forward(x.args);
    const cpu::Fp64Outputs ref = packed_kv_cache_oracle(x.dense, {x.q.begin(), x.q.end()}, {x.k.begin(), x.k.end()},
                                                        {x.v.begin(), x.v.end()}, pc.cu_q, pc.total_q, x.lengths, 1);
    for (std::size_t i = 0; i < x.o.size(); ++i) {
      if (std::isnan(ref.o[i])) {
        ASSERT_TRUE(std::isnan(x.o[i])) << "o[" << i << "] belongs to no sequence";
      } else {
        ASSERT_NEAR(x.o[i], ref.o[i], 1e-5) << "o[" << i << "]";
      }
    }
    for (std::size_t i = 0; i < x.lse.size(); ++i) {
      if (std::isnan(ref.lse[i]) || std::isinf(ref.lse[i])) {
        EXPECT_EQ(std::isnan(x.lse[i]), std::isnan(ref.lse[i])) << "lse[" << i << "]";
        EXPECT_EQ(std::isinf(x.lse[i]), std::isinf(ref.lse[i])) << "lse[" << i << "]";
      } else {
        ASSERT_NEAR(x.lse[i], ref.lse[i], 1e-5) << "lse[" << i << "]";
      }
    }
  }
}

TEST(KvCacheCpu, PackedQueriesAreValidatedAgainstTheCache) {
  std::mt19937 rng(9);
  PackedCall pc = make_packed_call(Cache{}, {2, 0, 6, 1}, rng);
  ForwardArgs a = pc.x.args;
  a.seqused_k.shape[0] = 3;
  expect_error(a, "seqused_k: shape[0] (batch) is 3, expected 4 like varlen.cu_seqlens_q (batch + 1)");
  a = pc.x.args;
  a.block_table.shape[0] = 5;
  expect_error(a, "block_table: shape[0] (batch) is 5, expected 4 like varlen.cu_seqlens_q (batch + 1)");
  a = pc.x.args;
  a.varlen.cu_seqlens_k = a.varlen.cu_seqlens_q;
  expect_error(a, "varlen.cu_seqlens_k: is set with a KV cache");
  a = pc.x.args;
  a.varlen.max_seqlen_q = 5;
  expect_error(a, "varlen.cu_seqlens_q: sequence 2 has 6 rows, expected at most varlen.max_seqlen_q = 5");
  a = pc.x.args;
  a.lse.shape[1] -= 1;
  expect_error(a, fmt::format("lse: shape[1] (total_q) is {}, expected {} like q", pc.total_q - 1, pc.total_q));
  pc.cu_q[4] = static_cast<int>(pc.total_q) + 1;
  expect_error(pc.x.args, fmt::format("varlen.cu_seqlens_q: [4] is {}, expected at most q: shape[0] (total_q) = {}",
                                      pc.total_q + 1, pc.total_q));
  for (float o : pc.x.o) EXPECT_TRUE(std::isnan(o)) << "a refused call wrote o";
}

// num_splits: 0..128 in decode-shaped calls, 0 or 1 elsewhere; the CPU's result is the same
// exact one whatever the count.
TEST(KvCacheCpu, NumSplitsIsValidatedAndLeavesTheResultAlone) {
  std::mt19937 rng(11);
  Call x = make_call(Cache{}, rng);
  ForwardArgs a = x.args;
  a.num_splits = -1;
  expect_error(a, "num_splits: is -1, expected 0 (automatic), 1 (unsplit) or 2..128");
  a.num_splits = 129;
  expect_error(a, "num_splits: is 129, expected 0 (automatic), 1 (unsplit) or 2..128");
  Runtime rt;
  rt.forward(x.args);
  const std::vector<float> o = x.o, lse = x.lse;
  for (int n : {1, 7, 128}) {
    a.num_splits = n;
    std::fill(x.o.begin(), x.o.end(), std::numeric_limits<float>::quiet_NaN());
    rt.forward(a);
    EXPECT_EQ(0, std::memcmp(o.data(), x.o.data(), o.size() * sizeof(float))) << n << " splits";
    EXPECT_EQ(0, std::memcmp(lse.data(), x.lse.data(), lse.size() * sizeof(float))) << n << " splits";
  }
  // Without a cache a call splits only at seqlen_q <= 16: 17 queries take 0 or 1.
  Cache prefill;
  prefill.seqlen_q = 17;
  Call y = make_call(prefill, rng);
  a = y.args;
  a.block_table = {};
  a.seqused_k = {};
  a.k = Tensor::contiguous(y.k.data(), DType::f32, {prefill.batch, prefill.capacity, prefill.heads_kv, prefill.head_dim});
  a.v = Tensor::contiguous(y.v.data(), DType::f32, {prefill.batch, prefill.capacity, prefill.heads_kv, prefill.head_dim});
  a.num_splits = 1;
  rt.forward(a);
  a.num_splits = 2;
  expect_error(a, "num_splits: is 2, expected 0 or 1 for this call: keys are split only in decode-shaped calls "
                  "(seqlen_q <= 16 or a KV cache), this one has seqlen_q 17 and no cache");
}

// Indices readable on the host are checked before any output is written.
TEST(KvCacheCpu, RefusesIndicesOutsideTheCache) {
  std::mt19937 rng(7);
  Call x = make_call(Cache{}, rng);
  Runtime rt;
  x.lengths[3] = 57;
  try {
    rt.forward(x.args);
    FAIL() << "seqused_k 57 of 56 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("seqused_k: element [3] is 57, expected 0..56"));
  }
  x.lengths[3] = 50;
  x.paged.table[static_cast<std::size_t>(2 * x.paged.max_pages + 1)] = static_cast<std::int32_t>(x.paged.num_pages);
  try {
    rt.forward(x.args);
    FAIL() << "a page past the cache accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("block_table: element [2, 1]"));
  }
  for (float o : x.o) EXPECT_TRUE(std::isnan(o)) << "a refused call wrote o";
}

TEST(KvCacheCpu, ValidatesTheIndexTensors) {
  std::mt19937 rng(8);
  Call x = make_call(Cache{}, rng);
  ForwardArgs a = x.args;
  a.block_table.dtype = DType::f32;
  expect_error(a, "block_table: dtype is 0, expected int32 (3)");
  a = x.args;
  a.block_table.shape[0] = 3;
  a.block_table.stride[0] = 8;
  expect_error(a, "block_table: shape[0] (batch) is 3, expected 4 like q");
  a = x.args;
  a.seqused_k.shape[0] = 5;
  expect_error(a, "seqused_k: shape[0] (batch) is 5, expected 4 like q");
  a = x.args;
  a.seqused_k.rank = 2;
  expect_error(a, "seqused_k: rank is 2, expected 1");
  a = x.args;
  a.block_table.stride[1] = 2;
  expect_error(a, "block_table: stride[1] (max_pages_per_seq) is 2, expected 1");
  a = x.args;
  a.v.shape[1] = 8;
  expect_error(a, "v: shape[1] (page_size) is 8, expected 7 like k");
}

}  // namespace
}  // namespace flashgen::test
