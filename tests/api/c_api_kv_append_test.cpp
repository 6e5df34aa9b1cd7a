// flashgen_append_kv on CPU tensors: the append oracle's cases (kv_append_reference.h) through
// the C structs, a struct from an older header (the first layout only) taking the defaults,
// and a refused call naming the argument with the caches untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>

#include "c_api_support.h"
#include "flashgen/flashgen.h"
#include "kv_append_reference.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

flashgen_tensor to_c(const Tensor& t) {
  flashgen_tensor out;
  std::memset(&out, 0, sizeof out);
  out.data = t.data;
  out.dtype = static_cast<flashgen_dtype>(t.dtype);
  out.device = t.device;
  out.rank = t.data ? t.rank : 0;
  for (int i = 0; i < 4; ++i) out.shape[i] = t.shape[i], out.stride[i] = t.stride[i];
  return out;
}

flashgen_kv_append_args to_c(const KvAppendArgs& a) {
  flashgen_kv_append_args out;
  flashgen_kv_append_args_init(&out);
  out.k = to_c(a.k), out.v = to_c(a.v), out.k_cache = to_c(a.k_cache), out.v_cache = to_c(a.v_cache);
  out.block_table = to_c(a.block_table), out.cache_seqlens = to_c(a.cache_seqlens);
  out.rotary_cos = to_c(a.rotary.cos), out.rotary_sin = to_c(a.rotary.sin);
  out.rotary_interleaved = a.rotary.interleaved;
  out.q_at_consecutive_positions = a.q_at_consecutive_positions;
  out.q = to_c(a.q), out.q_rotated = to_c(a.q_rotated), out.cu_seqlens = to_c(a.cu_seqlens);
  return out;
}

const auto kHost = [](void* host, std::size_t) { return host; };

using CApiKvAppend = CApiRuntimeTest;

TEST_F(CApiKvAppend, CasesMatchTheOracle) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (const KvAppendCase& c : kv_append_cases()) {
    if (c.out_of_range) continue;  // refused on the CPU
    SCOPED_TRACE(name_of(c));
    KvAppendBuffers b = kv_append_inputs(c, rng);
    const KvAppendExpected want = kv_append_expected(c, b);
    const flashgen_kv_append_args args = to_c(kv_append_args(c, b, kHost, kCpu));
    ASSERT_EQ(flashgen_append_kv(runtime_, &args, nullptr), FLASHGEN_OK) << flashgen_last_error();
    expect_kv_append(c, b, want);
  }
}

TEST_F(CApiKvAppend, AStructOfTheFirstLayoutIsRead) {
  std::mt19937 rng(3);
  const KvAppendCase c = kv_append_cases().at(1);  // paged, rotated, q in place
  KvAppendBuffers b = kv_append_inputs(c, rng);
  const KvAppendExpected want = kv_append_expected(c, b);
  flashgen_kv_append_args args = to_c(kv_append_args(c, b, kHost, kCpu));
  args.struct_size = offsetof(flashgen_kv_append_args, q_rotated) + sizeof(flashgen_tensor);
  ASSERT_EQ(flashgen_append_kv(runtime_, &args, nullptr), FLASHGEN_OK) << flashgen_last_error();
  expect_kv_append(c, b, want);
  args.struct_size = 0;
  EXPECT_EQ(flashgen_append_kv(runtime_, &args, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("args.struct_size: is 0, expected sizeof(flashgen_kv_append_args)"));
}

TEST_F(CApiKvAppend, ARefusedCallNamesTheArgumentAndWritesNothing) {
  std::mt19937 rng(5);
  const KvAppendCase c = kv_append_cases().at(0);
  KvAppendBuffers b = kv_append_inputs(c, rng);
  b.cache_seqlens[2] = c.capacity;  // its new row would be past the cache
  const std::vector<std::uint16_t> k_cache = b.k_cache, v_cache = b.v_cache;
  const flashgen_kv_append_args args = to_c(kv_append_args(c, b, kHost, kCpu));
  EXPECT_EQ(flashgen_append_kv(runtime_, &args, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("cache_seqlens: [2] is 40, expected 0..39"));
  EXPECT_EQ(b.k_cache, k_cache);
  EXPECT_EQ(b.v_cache, v_cache);
  EXPECT_EQ(flashgen_append_kv(runtime_, nullptr, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("args: is null"));
}

}  // namespace
}  // namespace flashgen::test
