// Buffer: constructors, element access, cast(), to_f32(), to_i32(), convert_value.
#include <climits>
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

TEST(Buffer, ZeroFilledConstructor) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool}) {
    Buffer b(t, {2, 3});
    EXPECT_EQ(b.dtype(), t);
    EXPECT_EQ(b.shape(), (Shape{2, 3}));
    EXPECT_EQ(b.numel(), 6u);
    EXPECT_EQ(b.nbytes(), 6 * luminal::dtype_size(t));
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b.get(i), 0.0);
  }
  Buffer scalar(DType::F32, {});
  EXPECT_EQ(scalar.numel(), 1u);
  EXPECT_EQ(scalar.shape_string(), "[]");
  Buffer empty(DType::I32, {4, 0});
  EXPECT_EQ(empty.numel(), 0u);
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_LM_ERROR(Buffer(DType::F32, {2, -1}), "negative", "[2, -1]");
}

TEST(Buffer, TypedConstructors) {
  Buffer f = Buffer::f32({1.5f, -2, NAN, 0}, {2, 2});
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_EQ(f.shape_string(), "[2, 2]");
  EXPECT_FLOATS_SAME(f.to_f32(), (std::vector<float>{1.5f, -2, NAN, 0}));
  Buffer i = Buffer::i32({INT_MIN, -1, 0, INT_MAX}, {4});
  EXPECT_EQ(i.dtype(), DType::I32);
  EXPECT_EQ(i.nbytes(), 16u);
  EXPECT_EQ(i.to_i32(), (std::vector<int32_t>{INT_MIN, -1, 0, INT_MAX}));
  EXPECT_EQ(i.get(0), -2147483648.0);
  Buffer b = Buffer::boolean({true, false, true}, {3, 1});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.nbytes(), 3u);
  EXPECT_EQ(b.bytes()[0], 1);
  EXPECT_EQ(b.bytes()[1], 0);
  EXPECT_EQ(b.to_i32(), (std::vector<int32_t>{1, 0, 1}));
}

TEST(Buffer, CountMismatchIsAnError) {
  EXPECT_LM_ERROR(Buffer::f32({1, 2, 3}, {2, 2}), "3", "[2, 2]", "4");
}

TEST(Buffer, CountMismatchOtherConstructors) {
  EXPECT_LM_ERROR(Buffer::i32({1, 2}, {3}), "2", "[3]");
  EXPECT_LM_ERROR(Buffer::boolean({true}, {0}), "1", "[0]");
  EXPECT_LM_ERROR(Buffer::f32({}, {1}), "0", "[1]");
}

TEST(Buffer, CastFromF32) {
  Buffer f = Buffer::f32({2.9f, -2.9f, 3e9f, -3e9f, NAN, -0.0f, 0.5f, 65520}, {8});
  EXPECT_EQ(f.cast(DType::I32).to_i32(), (std::vector<int32_t>{2, -2, INT_MAX, INT_MIN, 0, 0, 0, 65520}));
  EXPECT_EQ(f.cast(DType::Bool).to_i32(), (std::vector<int32_t>{1, 1, 1, 1, 1, 0, 1, 1}));
  Buffer h = f.cast(DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.nbytes(), 16u);
  EXPECT_FLOATS_SAME(h.to_f32(), (std::vector<float>{luminal::round_to(DType::F16, 2.9f), luminal::round_to(DType::F16, -2.9f),
                                                     INFINITY, -INFINITY, NAN, -0.0f, 0.5f, INFINITY}));
  EXPECT_FLOATS_SAME(f.cast(DType::BF16).to_f32(), (std::vector<float>{2.90625f, -2.90625f, 3003121664.0f, -3003121664.0f, NAN, -0.0f, 0.5f, 65536}));
  Buffer same = f.cast(DType::F32);
  EXPECT_FLOATS_SAME(same.to_f32(), f.to_f32());
}

TEST(Buffer, CastFromIntAndBool) {
  Buffer i = Buffer::i32({-3, 0, 16777217, INT_MAX}, {4});
  EXPECT_FLOATS_SAME(i.cast(DType::F32).to_f32(), (std::vector<float>{-3, 0, 16777216, 2147483648.0f}));
  EXPECT_EQ(i.cast(DType::Bool).to_i32(), (std::vector<int32_t>{1, 0, 1, 1}));
  Buffer b = Buffer::boolean({true, false}, {2});
  EXPECT_FLOATS_SAME(b.cast(DType::F32).to_f32(), (std::vector<float>{1, 0}));
  EXPECT_EQ(b.cast(DType::I32).to_i32(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(b.cast(DType::F16).get(0), 1.0);
}

TEST(Buffer, SetConvertsWithCastSemantics) {
  Buffer i(DType::I32, {3});
  i.set(0, 2.9);
  i.set(1, -1e12);
  i.set(2, NAN);
  EXPECT_EQ(i.to_i32(), (std::vector<int32_t>{2, INT_MIN, 0}));
  Buffer h(DType::F16, {2});
  h.set(0, 1 + 0x1p-11);
  h.set(1, 1e6);
  EXPECT_FLOATS_SAME(h.to_f32(), (std::vector<float>{1, INFINITY}));
  Buffer b(DType::Bool, {2});
  b.set(0, NAN);
  b.set(1, -0.0);
  EXPECT_EQ(b.to_i32(), (std::vector<int32_t>{1, 0}));
  // to_i32 converts floats like Cast does.
  EXPECT_EQ(Buffer::f32({-7.9f, NAN, 1e10f}, {3}).to_i32(), (std::vector<int32_t>{-7, 0, INT_MAX}));
}

TEST(Buffer, ConvertValue) {
  using luminal::convert_value;
  EXPECT_EQ(convert_value(2.9, DType::I32), 2);
  EXPECT_EQ(convert_value(-2.9, DType::I32), -2);
  EXPECT_EQ(convert_value(1e10, DType::I32), INT_MAX);
  EXPECT_EQ(convert_value(-1e10, DType::I32), INT_MIN);
  EXPECT_EQ(convert_value(NAN, DType::I32), 0);
  EXPECT_EQ(convert_value(NAN, DType::Bool), 1);
  EXPECT_EQ(convert_value(0.0, DType::Bool), 0);
  EXPECT_EQ(convert_value(0.1, DType::F32), static_cast<double>(0.1f));
  EXPECT_EQ(convert_value(1 + 0x1p-11, DType::F16), 1.0);
  EXPECT_EQ(convert_value(1 + 0x1p-8, DType::BF16), 1.0);
  EXPECT_EQ(luminal::shape_string({}), "[]");
  EXPECT_EQ(luminal::shape_string({4, 0, 7}), "[4, 0, 7]");
}
