// dtype names, sizes and classification.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"

using luminal::DType;

TEST(DTypeNames, NameOfEachDType) {
  EXPECT_STREQ(luminal::dtype_name(DType::F32), "f32");
  EXPECT_STREQ(luminal::dtype_name(DType::F16), "f16");
  EXPECT_STREQ(luminal::dtype_name(DType::BF16), "bf16");
  EXPECT_STREQ(luminal::dtype_name(DType::I32), "i32");
  EXPECT_STREQ(luminal::dtype_name(DType::Bool), "bool");
}

TEST(DTypeNames, FromNameRoundTrips) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool})
    EXPECT_EQ(luminal::dtype_from_name(luminal::dtype_name(t)), t);
}

TEST(DTypeNames, UnknownNameThrowsListingValidNames) {
  try {
    luminal::dtype_from_name("f64");
    FAIL() << "expected luminal::Error";
  } catch (const luminal::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("f64"), std::string::npos) << msg;
    for (const char* n : {"f32", "f16", "bf16", "i32", "bool"}) EXPECT_NE(msg.find(n), std::string::npos) << n << ": " << msg;
  }
  // Names are exact: no case folding, no empty name.
  EXPECT_THROW(luminal::dtype_from_name("F32"), luminal::Error);
  EXPECT_THROW(luminal::dtype_from_name(""), luminal::Error);
  EXPECT_THROW(luminal::dtype_from_name("f32 "), luminal::Error);
}

TEST(DTypeNames, SizesAndClasses) {
  EXPECT_EQ(luminal::dtype_size(DType::F32), 4u);
  EXPECT_EQ(luminal::dtype_size(DType::F16), 2u);
  EXPECT_EQ(luminal::dtype_size(DType::BF16), 2u);
  EXPECT_EQ(luminal::dtype_size(DType::I32), 4u);
  EXPECT_EQ(luminal::dtype_size(DType::Bool), 1u);
  EXPECT_TRUE(luminal::is_float(DType::F32));
  EXPECT_TRUE(luminal::is_float(DType::F16));
  EXPECT_TRUE(luminal::is_float(DType::BF16));
  EXPECT_FALSE(luminal::is_float(DType::I32));
  EXPECT_FALSE(luminal::is_float(DType::Bool));
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool}) EXPECT_FALSE(luminal::is_storage_only(t));
}
