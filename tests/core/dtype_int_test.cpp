// f32 -> i32 (Cast semantics) and round_to.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "core/dtype.h"

using luminal::DType;
using luminal::f32_to_i32;

TEST(DTypeInt, TruncatesTowardZero) {
  EXPECT_EQ(f32_to_i32(2.9f), 2);
  EXPECT_EQ(f32_to_i32(-2.9f), -2);
  EXPECT_EQ(f32_to_i32(0.5f), 0);
  EXPECT_EQ(f32_to_i32(-0.5f), 0);
  EXPECT_EQ(f32_to_i32(-0.0f), 0);
  EXPECT_EQ(f32_to_i32(7.0f), 7);
  EXPECT_EQ(f32_to_i32(2147483520.0f), 2147483520);  // largest f32 below 2^31
  EXPECT_EQ(f32_to_i32(-2147483648.0f), INT_MIN);    // -2^31 is in range
}

TEST(DTypeInt, Saturates) {
  EXPECT_EQ(f32_to_i32(2147483648.0f), INT_MAX);
  EXPECT_EQ(f32_to_i32(3e9f), INT_MAX);
  EXPECT_EQ(f32_to_i32(-3e9f), INT_MIN);
  EXPECT_EQ(f32_to_i32(-2147483904.0f), INT_MIN);  // next f32 below -2^31
  EXPECT_EQ(f32_to_i32(INFINITY), INT_MAX);
  EXPECT_EQ(f32_to_i32(-INFINITY), INT_MIN);
  EXPECT_EQ(f32_to_i32(3.4e38f), INT_MAX);
}

TEST(DTypeInt, NaNIsZero) {
  EXPECT_EQ(f32_to_i32(NAN), 0);
  EXPECT_EQ(f32_to_i32(-NAN), 0);
}

TEST(DTypeRoundTo, RoundsToTheTargetPrecision) {
  EXPECT_EQ(luminal::round_to(DType::F32, 1.0f + 0x1p-20f), 1.0f + 0x1p-20f);
  EXPECT_EQ(luminal::round_to(DType::F16, 1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(luminal::round_to(DType::F16, 1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(luminal::round_to(DType::F16, 70000.0f), INFINITY);
  EXPECT_EQ(luminal::round_to(DType::BF16, 1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(luminal::round_to(DType::BF16, 1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(luminal::round_to(DType::BF16, 70000.0f), 70144.0f);  // 0x4789: 8 significant bits
  EXPECT_TRUE(std::isnan(luminal::round_to(DType::BF16, NAN)));
  EXPECT_TRUE(std::isnan(luminal::round_to(DType::F16, NAN)));
}
