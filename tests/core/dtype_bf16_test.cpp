// f32 -> bf16 narrowing at hand-picked points: ties, carries, overflow, NaN, Inf, zeros.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/dtype_test_util.h"

using dtypetest::bits;
using dtypetest::from_bits;
using luminal::bf16_to_f32;
using luminal::f32_to_bf16;

static uint16_t bf(uint32_t f32_bits) { return f32_to_bf16(from_bits(f32_bits)); }

TEST(DTypeBF16, ExactValuesKeepTheirBits) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-7f), 0x3f81);
  EXPECT_EQ(bf16_to_f32(0x3f81), 1.0f + 0x1p-7f);
}

TEST(DTypeBF16, TiesGoToEven) {
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): down to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3*2^-8 lies halfway between 0x3f81 (odd) and 0x3f82 (even): up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  // Negative ties mirror the positive ones.
  EXPECT_EQ(f32_to_bf16(-(1.0f + 0x1p-8f)), 0xbf80);
  EXPECT_EQ(f32_to_bf16(-(1.0f + 3 * 0x1p-8f)), 0xbf82);
  // One f32 ulp off a tie is no longer a tie.
  EXPECT_EQ(bf(0x3f808001), 0x3f81);
  EXPECT_EQ(bf(0x3f817fff), 0x3f81);
}

TEST(DTypeBF16, RoundingCarriesIntoTheExponent) {
  EXPECT_EQ(bf(0x3fff8000), 0x4000);  // tie above 0x3fff (odd) -> 2.0
  EXPECT_EQ(bf(0x3fffffff), 0x4000);  // just below 2.0
  EXPECT_EQ(bf(0x3fff7fff), 0x3fff);  // just below the tie stays
  EXPECT_EQ(bf(0x007f8000), 0x0080);  // largest subnormal tie -> smallest normal
}

TEST(DTypeBF16, OverflowGoesToInf) {
  EXPECT_EQ(f32_to_bf16(3.4028235e38f), 0x7f80);  // FLT_MAX
  EXPECT_EQ(f32_to_bf16(-3.4028235e38f), 0xff80);
  EXPECT_EQ(bf(0x7f7f8000), 0x7f80);  // tie above the largest bf16 (odd) -> Inf
  EXPECT_EQ(bf(0x7f7f7fff), 0x7f7f);  // below the tie: largest finite bf16
}

TEST(DTypeBF16, InfAndNaN) {
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(std::isinf(bf16_to_f32(0x7f80)) && bf16_to_f32(0x7f80) > 0);
  // Any NaN, including ones whose payload lives only in the low 16 bits (truncation would
  // turn those into Inf), stays NaN with its sign.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    uint16_t h = bf(nan);
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << nan << " -> " << h;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
}

TEST(DTypeBF16, ZerosAndSubnormals) {
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(bf16_to_f32(0x8000)));
  EXPECT_EQ(bf(0x00010000), 0x0001);  // smallest bf16 subnormal, 2^-133
  EXPECT_EQ(bf16_to_f32(0x0001), 0x1p-133f);
  EXPECT_EQ(bf(0x00008000), 0x0000);  // tie between 0 and 2^-133 -> 0
  EXPECT_EQ(bf(0x80008000), 0x8000);  // ... keeping the sign
  EXPECT_EQ(bf(0x00008001), 0x0001);
  EXPECT_EQ(bf(0x00018000), 0x0002);  // tie between 1 (odd) and 2 ulps -> 2
  EXPECT_EQ(bf(0x00000001), 0x0000);  // smallest f32 subnormal rounds to 0
}

TEST(DTypeBF16, DecodeIsTheTopHalfOfAnF32) {
  for (uint32_t h = 0; h < 0x10000; h += 0x101) EXPECT_EQ(bits(bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
}
