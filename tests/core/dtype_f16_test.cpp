// f32 <-> f16 at hand-picked points: ties, carries, the overflow boundary, subnormals, NaN, Inf.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/dtype_test_util.h"

using dtypetest::bits;
using dtypetest::from_bits;
using luminal::f16_to_f32;
using luminal::f32_to_f16;

TEST(DTypeF16, ExactValuesKeepTheirBits) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-10f), 0x3c01);
  EXPECT_EQ(f16_to_f32(0x3c01), 1.0f + 0x1p-10f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
}

TEST(DTypeF16, TiesGoToEven) {
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      // between 0x3c00 (even) and 0x3c01: down
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // between 0x3c01 (odd) and 0x3c02: up
  EXPECT_EQ(f32_to_f16(-(1.0f + 0x1p-11f)), 0xbc00);
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  EXPECT_EQ(f32_to_f16(2049.0f), 0x6800);  // 2048 + half an ulp: down to 2048
  EXPECT_EQ(f32_to_f16(2051.0f), 0x6802);  // 2050 (odd) + half an ulp: up to 2052
  EXPECT_EQ(f32_to_f16(from_bits(bits(1.0f + 0x1p-11f) + 1)), 0x3c01);  // one f32 ulp past the tie
}

TEST(DTypeF16, RoundingCarriesIntoTheExponent) {
  EXPECT_EQ(f32_to_f16(2.0f - 0x1p-11f), 0x4000);  // tie above 0x3fff (odd) -> 2.0
  EXPECT_EQ(f32_to_f16(2.0f - 0x1p-20f), 0x4000);
  EXPECT_EQ(f32_to_f16(2.0f - 0x1p-10f), 0x3fff);  // exactly representable
  EXPECT_EQ(f32_to_f16(1023.5f * 0x1p-24f), 0x0400);  // largest-subnormal tie -> smallest normal
}

TEST(DTypeF16, OverflowBoundary) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);    // largest finite f16
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);   // just below the tie
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // the tie rounds to "65536" = Inf
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16(-65504.0f), 0xfbff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(3.4028235e38f), 0x7c00);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
}

TEST(DTypeF16, InfAndNaN) {
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f801fffu, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    uint16_t h = f32_to_f16(from_bits(nan));
    EXPECT_EQ(h & 0x7c00, 0x7c00) << std::hex << nan << " -> " << h;
    EXPECT_NE(h & 0x03ff, 0) << std::hex << nan << " -> " << h;
    EXPECT_TRUE(std::isnan(f16_to_f32(h)));
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0xfe00)));
}

TEST(DTypeF16, SignedZero) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x8000), 0.0f);
  EXPECT_EQ(f32_to_f16(-1e-30f), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16(from_bits(1)), 0x0000);  // f32 subnormals
}

TEST(DTypeF16, SubnormalsAreExact) {
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: to even 0
  EXPECT_EQ(f32_to_f16(-0x1p-25f), 0x8000);
  EXPECT_EQ(f32_to_f16(0x1p-25f * 1.0000001f), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);  // tie between 1 (odd) and 2: up
  EXPECT_EQ(f32_to_f16(5 * 0x1p-25f), 0x0002);  // tie between 2 (even) and 3: down
  for (uint16_t m = 1; m < 0x400; ++m) {
    float v = static_cast<float>(m) * 0x1p-24f;
    EXPECT_EQ(f16_to_f32(m), v) << m;
    EXPECT_EQ(f32_to_f16(v), m) << m;
    EXPECT_EQ(f16_to_f32(m | 0x8000), -v) << m;
    EXPECT_EQ(f32_to_f16(-v), m | 0x8000) << m;
  }
}
