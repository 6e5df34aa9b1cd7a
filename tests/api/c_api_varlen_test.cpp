// The C API's packed variable-length sequences on CPU tensors, many random packings: every
// buffer is a heap block of exactly its bytes (ASan, in the sanitizer CI step, flags a read
// past it), lengths from 0 up, rows before the first and after the last sequence; forward and
// backward must equal the C API's dense calls on copies of each sequence's rows, bit for bit
// (the same tiled code runs), and leave the rows outside every sequence untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "c_api_support.h"
#include "flashgen/flashgen.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A heap block of exactly n floats (or int32s), filled with `value`.
template <typename T>
std::unique_ptr<T[]> block(std::size_t n, T value) {
  auto out = std::make_unique<T[]>(n);
  std::fill_n(out.get(), n, value);
  return out;
}

// got[0, n) equals want[0, n), as floats (NaN never equals).
void expect_same(const char* what, int b, const float* got, const float* want, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!(got[i] == want[i])) {
      ADD_FAILURE() << what << " of sequence " << b << ": element " << i << " is " << got[i] << ", expected " << want[i];
      return;
    }
}

using CApiVarlen = CApiRuntimeTest;

TEST_F(CApiVarlen, RandomPackingsEqualPerSequenceDenseCalls) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::normal_distribution<float> normal;
  for (int round = 0; round < 30; ++round) {
    const int batch = uniform(1, 4), heads_kv = uniform(1, 2), heads_q = heads_kv * uniform(1, 3);
    const int d = uniform(1, 40), lead = uniform(0, 2), spare = uniform(0, 2);
    const bool causal = round % 2 != 0;
    std::vector<std::int32_t> cu_q{lead}, cu_k{lead};
    for (int b = 0; b < batch; ++b) {
      cu_q.push_back(cu_q.back() + (uniform(0, 4) == 0 ? 0 : uniform(1, 70)));
      cu_k.push_back(cu_k.back() + (uniform(0, 4) == 0 ? 0 : uniform(1, 70)));
    }
    // Empty tensors are refused: a packing without any query or key row keeps a spare one.
    const std::int64_t total_q = std::max(cu_q.back() + spare, 1), total_k = std::max(cu_k.back() + spare, 1);
    std::int64_t max_q = 1, max_k = 1;
    for (int b = 0; b < batch; ++b) {
      max_q = std::max<std::int64_t>(max_q, cu_q[b + 1] - cu_q[b]);
      max_k = std::max<std::int64_t>(max_k, cu_k[b + 1] - cu_k[b]);
    }
    SCOPED_TRACE(::testing::Message() << "round " << round << ": batch " << batch << " heads " << heads_q << "x"
                                      << heads_kv << " d" << d << " total " << total_q << "/" << total_k);
    const std::size_t row_q = static_cast<std::size_t>(heads_q) * d, row_k = static_cast<std::size_t>(heads_kv) * d;
    const std::size_t nq = total_q * row_q, nk = total_k * row_k;
    auto q = block(nq, kNaN), dout = block(nq, kNaN), k = block(nk, kNaN), v = block(nk, kNaN);
    for (std::size_t i = cu_q[0] * row_q; i < cu_q.back() * row_q; ++i) q[i] = normal(rng), dout[i] = normal(rng);
    for (std::size_t i = cu_k[0] * row_k; i < cu_k.back() * row_k; ++i) k[i] = normal(rng), v[i] = normal(rng);
    auto o = block(nq, kNaN), dq = block(nq, kNaN), dk = block(nk, kNaN), dv = block(nk, kNaN);
    auto lse = block(static_cast<std::size_t>(heads_q * total_q), kNaN);
    auto cq = block<std::int32_t>(cu_q.size(), 0), ck = block<std::int32_t>(cu_k.size(), 0);
    std::copy(cu_q.begin(), cu_q.end(), cq.get());
    std::copy(cu_k.begin(), cu_k.end(), ck.get());

    flashgen_forward_args f;
    flashgen_forward_args_init(&f);
    f.q = view(q.get(), FLASHGEN_F32, {total_q, heads_q, d});
    f.k = view(k.get(), FLASHGEN_F32, {total_k, heads_kv, d});
    f.v = view(v.get(), FLASHGEN_F32, {total_k, heads_kv, d});
    f.o = view(o.get(), FLASHGEN_F32, {total_q, heads_q, d});
    f.lse = view(lse.get(), FLASHGEN_F32, {heads_q, total_q});
    f.options.causal = causal;
    f.cu_seqlens_q = view(cq.get(), FLASHGEN_INT32, {batch + 1});
    f.cu_seqlens_k = view(ck.get(), FLASHGEN_INT32, {batch + 1});
    f.max_seqlen_q = max_q;
    f.max_seqlen_k = max_k;
    ASSERT_EQ(flashgen_forward(runtime_, &f, nullptr), FLASHGEN_OK) << flashgen_last_error();
    flashgen_backward_args g;
    flashgen_backward_args_init(&g);
    g.q = f.q, g.k = f.k, g.v = f.v, g.o = f.o, g.lse = f.lse, g.options = f.options;
    g.dout = view(dout.get(), FLASHGEN_F32, {total_q, heads_q, d});
    g.dq = view(dq.get(), FLASHGEN_F32, {total_q, heads_q, d});
    g.dk = view(dk.get(), FLASHGEN_F32, {total_k, heads_kv, d});
    g.dv = view(dv.get(), FLASHGEN_F32, {total_k, heads_kv, d});
    g.cu_seqlens_q = f.cu_seqlens_q, g.cu_seqlens_k = f.cu_seqlens_k;
    g.max_seqlen_q = max_q, g.max_seqlen_k = max_k;
    ASSERT_EQ(flashgen_backward(runtime_, &g, nullptr), FLASHGEN_OK) << flashgen_last_error();

    // Outside every sequence: untouched.
    for (std::size_t i = 0; i < nq; ++i) {
      const bool outside = i < cu_q[0] * row_q || i >= cu_q.back() * row_q;
      ASSERT_TRUE(!outside || (std::isnan(o[i]) && std::isnan(dq[i]))) << "o or dq written at " << i;
    }
    for (std::size_t i = 0; i < nk; ++i) {
      const bool outside = i < cu_k[0] * row_k || i >= cu_k.back() * row_k;
      ASSERT_TRUE(!outside || (std::isnan(dk[i]) && std::isnan(dv[i]))) << "dk or dv written at " << i;
    }

    for (int b = 0; b < batch; ++b) {
      const std::int64_t lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
      const std::size_t q0 = cu_q[b] * row_q, k0 = cu_k[b] * row_k;
      // The sequence as a dense batch of one, in blocks of its own.
      std::vector<float> want_o(lq * row_q, 0.0f), want_lse(heads_q * lq, -INFINITY), want_dq(lq * row_q, 0.0f);
      std::vector<float> want_dk(lk * row_k, 0.0f), want_dv(lk * row_k, 0.0f);
      if (lq > 0 && lk > 0) {
        auto sq = block(lq * row_q, 0.0f), sdout = block(lq * row_q, 0.0f), so = block(lq * row_q, kNaN);
        auto sk = block(lk * row_k, 0.0f), sv = block(lk * row_k, 0.0f), slse = block<float>(heads_q * lq, kNaN);
        auto sdq = block(lq * row_q, kNaN), sdk = block(lk * row_k, kNaN), sdv = block(lk * row_k, kNaN);
        std::copy_n(q.get() + q0, lq * row_q, sq.get());
        std::copy_n(dout.get() + q0, lq * row_q, sdout.get());
        std::copy_n(k.get() + k0, lk * row_k, sk.get());
        std::copy_n(v.get() + k0, lk * row_k, sv.get());
        flashgen_forward_args sf;
        flashgen_forward_args_init(&sf);
        sf.q = view(sq.get(), FLASHGEN_F32, {1, lq, heads_q, d});
        sf.k = view(sk.get(), FLASHGEN_F32, {1, lk, heads_kv, d});
        sf.v = view(sv.get(), FLASHGEN_F32, {1, lk, heads_kv, d});
        sf.o = view(so.get(), FLASHGEN_F32, {1, lq, heads_q, d});
        sf.lse = view(slse.get(), FLASHGEN_F32, {1, heads_q, lq});
        sf.options = f.options;
        ASSERT_EQ(flashgen_forward(runtime_, &sf, nullptr), FLASHGEN_OK) << flashgen_last_error();
        flashgen_backward_args sg;
        flashgen_backward_args_init(&sg);
        sg.q = sf.q, sg.k = sf.k, sg.v = sf.v, sg.o = sf.o, sg.lse = sf.lse, sg.options = sf.options;
        sg.dout = view(sdout.get(), FLASHGEN_F32, {1, lq, heads_q, d});
        sg.dq = view(sdq.get(), FLASHGEN_F32, {1, lq, heads_q, d});
        sg.dk = view(sdk.get(), FLASHGEN_F32, {1, lk, heads_kv, d});
        sg.dv = view(sdv.get(), FLASHGEN_F32, {1, lk, heads_kv, d});
        ASSERT_EQ(flashgen_backward(runtime_, &sg, nullptr), FLASHGEN_OK) << flashgen_last_error();
        std::copy_n(so.get(), want_o.size(), want_o.begin());
        std::copy_n(slse.get(), want_lse.size(), want_lse.begin());
        std::copy_n(sdq.get(), want_dq.size(), want_dq.begin());
        std::copy_n(sdk.get(), want_dk.size(), want_dk.begin());
        std::copy_n(sdv.get(), want_dv.size(), want_dv.begin());
      }
      std::vector<float> got_lse(want_lse.size());
      for (int h = 0; h < heads_q; ++h)
        for (std::int64_t i = 0; i < lq; ++i) got_lse[h * lq + i] = lse[h * total_q + cu_q[b] + i];
      expect_same("o", b, o.get() + q0, want_o.data(), lq * row_q);
      expect_same("lse", b, got_lse.data(), want_lse.data(), heads_q * lq);
      expect_same("dq", b, dq.get() + q0, want_dq.data(), lq * row_q);
      expect_same("dk", b, dk.get() + k0, want_dk.data(), lk * row_k);
      expect_same("dv", b, dv.get() + k0, want_dv.data(), lk * row_k);
    }

    // A bad offset is refused by name, outputs untouched.
    std::fill_n(o.get(), nq, kNaN);
    ck[batch] = static_cast<std::int32_t>(total_k + 1);
    EXPECT_EQ(flashgen_forward(runtime_, &f, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(flashgen_last_error(), HasSubstr("varlen.cu_seqlens_k: ["));
    for (std::size_t i = 0; i < nq; ++i) ASSERT_TRUE(std::isnan(o[i])) << "a refused call wrote o[" << i << "]";
  }
}

}  // namespace
}  // namespace flashgen::test
