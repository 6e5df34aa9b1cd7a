// Runtime::append_kv on the CPU backend against the append oracle (kv_append_reference.h),
// and the errors of validate_kv_append: each names the argument and what was expected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>

#include "kv_append_reference.h"
#include "runtime/validate.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

const auto kHost = [](void* host, std::size_t) { return host; };

TEST(KvAppendCpu, MatchesTheOracle) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  Runtime rt;
  for (const KvAppendCase& c : kv_append_cases()) {
    if (c.out_of_range) continue;  // refused on the CPU: KvAppendCpu.PositionsOutsideTheCacheAreRefused
    SCOPED_TRACE(name_of(c));
    KvAppendBuffers b = kv_append_inputs(c, rng);
    const KvAppendExpected want = kv_append_expected(c, b);
    rt.append_kv(kv_append_args(c, b, kHost, kCpu));
    expect_kv_append(c, b, want);
  }
}

// A paged case with rotated q, for the error tests to break one argument at a time.
struct Call {
  KvAppendCase c{64, DType::bf16, 2, 3, 2, 32, 8, 32, false, 4, 3, false, true, false};
  std::mt19937 rng{7};
  KvAppendBuffers b = kv_append_inputs(c, rng);
  KvAppendArgs args = kv_append_args(c, b, kHost, kCpu);
};

std::string error_of(const KvAppendArgs& args) {
  try {
    Runtime().append_kv(args);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    return e.what();
  }
  return "no error";
}

TEST(KvAppendCpu, PositionsOutsideTheCacheAreRefused) {
  Call call;
  call.b.cache_seqlens[1] = 30;  // 30 + 3 new rows > 32
  EXPECT_THAT(error_of(call.args), HasSubstr("cache_seqlens: [1] is 30, expected 0..29"));
  call.b.cache_seqlens[1] = -1;
  EXPECT_THAT(error_of(call.args), HasSubstr("cache_seqlens: [1] is -1"));
  call.b.cache_seqlens[1] = 9;
  call.b.block_table[call.b.pages_per_seq + 1] = 99;  // the page of positions 8..15 of sequence 1
  EXPECT_THAT(error_of(call.args), HasSubstr("block_table: [1][1] is 99, expected a page in 0..8"));
}

TEST(KvAppendCpu, QueryPositionsPastTheTableAreRefused) {
  Call call;
  call.c.seqlen_q = 5;  // 5 queries from position 29 reach past the 32 rows of the tables
  call.b = kv_append_inputs(call.c, call.rng);
  call.b.cache_seqlens[0] = 29;
  call.args = kv_append_args(call.c, call.b, kHost, kCpu);
  EXPECT_THAT(error_of(call.args), HasSubstr("rotary.cos: shape[0] (positions) is 32, expected more than 33"));
}

TEST(KvAppendCpu, BadArgumentsNameTheArgument) {
  {
    Call call;
    call.args.cache_seqlens = {};
    EXPECT_THAT(error_of(call.args), HasSubstr("cache_seqlens: data is null, expected int32 (batch,)"));
  }
  {
    Call call;
    call.args.rotary.sin = {};
    EXPECT_THAT(error_of(call.args), HasSubstr("rotary.sin: data is null while rotary.cos is set"));
  }
  {
    Call call;  // rotary_dim 24: no multiple of 16
    call.args.rotary.cos.shape[1] = call.args.rotary.sin.shape[1] = 12;
    EXPECT_THAT(error_of(call.args), HasSubstr("rotary_dim = 24 to be a multiple of 16"));
  }
  {
    Call call;
    call.args.rotary.cos.shape[0] = call.args.rotary.sin.shape[0] = 20;
    EXPECT_THAT(error_of(call.args), HasSubstr("rotary.cos: shape[0] (positions) is 20, expected at least the "
                                               "cache's capacity 32"));
  }
  {
    Call call;
    call.args.rotary = {};
    EXPECT_THAT(error_of(call.args), HasSubstr("q: is set without rotary.cos and rotary.sin"));
  }
  {
    Call call;
    call.args.v_cache = call.args.k_cache;
    EXPECT_THAT(error_of(call.args), HasSubstr("v_cache: shares memory with k_cache"));
  }
  {
    Call call;
    call.args.k_cache.data = call.args.k.data;
    EXPECT_THAT(error_of(call.args), HasSubstr("k_cache: shares memory with k"));
  }
  {
    Call call;
    call.args.v.shape[2] = 1;
    EXPECT_THAT(error_of(call.args), HasSubstr("v: shape[2] (heads_kv) is 1, expected 2 like k"));
  }
  {
    Call call;
    call.args.k_cache.shape[3] = 32;
    EXPECT_THAT(error_of(call.args), HasSubstr("k_cache: shape[3] (head_dim) is 32, expected 64"));
  }
  {
    Call call;
    call.args.block_table.shape[0] = 1;
    EXPECT_THAT(error_of(call.args), HasSubstr("block_table: shape[0] (batch) is 1, expected 2 like k"));
  }
  {
    Call call;
    call.args.q.dtype = call.args.q_rotated.dtype = DType::f16;
    EXPECT_THAT(error_of(call.args), HasSubstr("q: is fp16 on cpu, expected bf16 on cpu like k"));
  }
}

// The GPU's limits are checked before any device work (validation reads no device memory).
TEST(KvAppendCpu, GpuLimitsNameTheArgument) {
  const auto on_device = [](KvAppendArgs a) {
    for (Tensor* t : {&a.k, &a.v, &a.k_cache, &a.v_cache, &a.block_table, &a.cache_seqlens, &a.rotary.cos,
                      &a.rotary.sin, &a.q, &a.q_rotated})
      t->device = 0;
    return a;
  };
  const auto status_and_message = [](const KvAppendArgs& a) {
    try {
      validate_kv_append(a);
    } catch (const Error& e) {
      return std::pair{e.status(), std::string(e.what())};
    }
    return std::pair{Status::ok, std::string("no error")};
  };
  {
    Call call;
    KvAppendArgs a = on_device(call.args);
    EXPECT_EQ(status_and_message(a).first, Status::ok) << status_and_message(a).second;
    a.k.data = static_cast<char*>(a.k.data) + 2;  // rows no longer on 16-byte boundaries
    const auto [status, message] = status_and_message(a);
    EXPECT_EQ(status, Status::unsupported);
    EXPECT_THAT(message, HasSubstr("k: data pointer")) << message;
    EXPECT_THAT(message, HasSubstr("16-byte alignment on cuda:0")) << message;
  }
}

}  // namespace
}  // namespace flashgen::test
