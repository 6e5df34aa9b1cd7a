// The bit-level fp16/bf16 conversions against independent references: the compiler's
// _Float16 for fp16, and a nearest-candidate search in double for bf16.
#include "runtime/cpu/dtype_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "attention_case.h"

namespace flashgen::cpu {
namespace {

std::uint16_t bits_of(float x) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16); }

// bf16 rounding by definition: of the two bf16 neighbours of x, the nearer; on a tie the even one.
std::uint16_t bf16_reference(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t below = static_cast<std::uint16_t>(f >> 16);  // truncation: toward zero
  const std::uint16_t above = static_cast<std::uint16_t>(below + 1);
  const double x_d = x, lo = bf16_bits_to_float(below);
  // The next bf16 above in magnitude; beyond the largest finite value it is infinity,
  // which rounds like the value 2^128 would.
  const double hi = (above & 0x7fff) == 0x7f80 ? std::copysign(0x1p128, x_d) : bf16_bits_to_float(above);
  const double to_lo = std::abs(x_d - lo), to_hi = std::abs(hi - x_d);
  if (to_lo < to_hi) return below;
  if (to_hi < to_lo) return above;
  return (below & 1) ? above : below;
}

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

#ifdef __FLT16_MAX__
TEST(DtypeConvert, HalfToFloatMatchesCompilerOnEveryBitPattern) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float expected = static_cast<float>(std::bit_cast<_Float16>(bits));
    ASSERT_TRUE(same_value(half_bits_to_float(bits), expected)) << std::hex << "bits 0x" << h;
  }
}

TEST(DtypeConvert, FloatToHalfMatchesCompilerAtEveryRoundingBoundary) {
  // Every fp16 value, the float midpoints to its neighbour, and one float ulp either side:
  // all the places where round-to-nearest-even decides.
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = half_bits_to_float(static_cast<std::uint16_t>(h));
    const float hi = h + 1 == 0x7c00 ? 65536.0f : half_bits_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      for (float signed_x : {x, -x}) {
        const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(signed_x));
        ASSERT_EQ(float_to_half_bits(signed_x), expected) << "x = " << signed_x;
      }
    }
  }
}

TEST(DtypeConvert, FloatToHalfMatchesCompilerOnRandomFloats) {
  const std::uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1'000'000; ++i) {
    const auto x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    const float got = half_bits_to_float(float_to_half_bits(x));
    const float expected = static_cast<float>(static_cast<_Float16>(x));
    ASSERT_TRUE(same_value(got, expected)) << "x = " << x << " bits " << std::bit_cast<std::uint32_t>(x);
  }
}
#endif

TEST(DtypeConvert, FloatToBf16RoundsToNearestEven) {
  const std::uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1'000'000; ++i) {
    auto f = static_cast<std::uint32_t>(rng());
    // Every fourth draw sits exactly on a tie, where the even rule decides.
    if (i % 4 == 0) f = (f & 0xffff0000u) | 0x8000u;
    const float x = std::bit_cast<float>(f);
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_bf16_bits(x), bf16_reference(x)) << "x = " << x << " bits " << f;
  }
}

TEST(DtypeConvert, SpecialValuesSurvive) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (DType t : {DType::f16, DType::bf16}) {
    EXPECT_EQ(round_to(t, inf), inf);
    EXPECT_EQ(round_to(t, -inf), -inf);
    EXPECT_TRUE(std::isnan(round_to(t, nan)));
    EXPECT_TRUE(std::isnan(round_to(t, -nan)));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(round_to(t, -0.0f)), std::bit_cast<std::uint32_t>(-0.0f));
  }
  // A signalling NaN whose payload lives only in the low bits must not become infinity.
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(round_to(DType::f16, low_payload_nan)));
  EXPECT_TRUE(std::isnan(round_to(DType::bf16, low_payload_nan)));
  EXPECT_EQ(round_to(DType::f16, 65504.0f), 65504.0f);
  EXPECT_EQ(round_to(DType::f16, 65519.99f), 65504.0f);
  EXPECT_EQ(round_to(DType::f16, 65520.0f), inf);
  EXPECT_EQ(round_to(DType::f16, 0x1p-24f), 0x1p-24f);                                   // smallest subnormal
  EXPECT_EQ(round_to(DType::f16, 0x1p-25f), 0.0f);                                       // tie: to even (zero)
  EXPECT_EQ(round_to(DType::f16, 0x1.8p-25f), 0x1p-24f);                                 // above the tie
  EXPECT_EQ(round_to(DType::bf16, 1.0f + 0x1p-8f), 1.0f);                                // tie: to even
  EXPECT_EQ(round_to(DType::bf16, 1.0f + 0x3p-8f), 1.0f + 0x1p-6f);                      // tie: to even (upwards)
  EXPECT_EQ(bits_of(round_to(DType::bf16, std::numeric_limits<float>::max())), 0x7f80);  // rounds to infinity
}

TEST(DtypeConvert, RoundingErrorIsWithinUnitRoundoff) {
  const std::uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1000.0f, 1000.0f);
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    for (int i = 0; i < 100'000; ++i) {
      const float x = uniform(rng);
      if (std::abs(x) < 1e-3f) continue;  // stay clear of fp16 subnormals
      ASSERT_LE(std::abs(static_cast<double>(round_to(t, x)) - x), unit_roundoff(t) * std::abs(x))
          << to_string(t) << " x = " << x;
    }
  }
}

TEST(DtypeConvert, LoadAndStoreUseTheElementIndex) {
  std::uint16_t halves[3] = {0, 0, 0};
  store_float(halves, DType::f16, 1, 1.5f);
  EXPECT_EQ(halves[0], 0);
  EXPECT_EQ(halves[1], 0x3e00);
  EXPECT_EQ(halves[2], 0);
  EXPECT_EQ(load_float(halves, DType::f16, 1), 1.5f);
  std::uint16_t brains[2] = {0, 0};
  store_float(brains, DType::bf16, 1, -2.0f);
  EXPECT_EQ(brains[1], 0xc000);
  EXPECT_EQ(load_float(brains, DType::bf16, 1), -2.0f);
  float floats[2] = {0, 0};
  store_float(floats, DType::f32, 1, 0.1f);
  EXPECT_EQ(load_float(floats, DType::f32, 1), 0.1f);
}

}  // namespace
}  // namespace flashgen::cpu
