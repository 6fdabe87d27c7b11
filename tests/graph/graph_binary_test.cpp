// Add, Mul, Mod, LessThan: per-dtype semantics and the left operand's dtype rule.
#include <climits>
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

// out = op(a, b) for two rank-1 inputs of the given dtypes; returns the output buffer.
Buffer binary(OpKind op, DType ta, Buffer a, DType tb, Buffer b) {
  Shape s = a.shape();
  Graph g;
  NodeId x = g.input("a", ta, exprs(s)), y = g.input("b", tb, exprs(s));
  NodeId r = g.binary(op, edge(g, x), edge(g, y));
  EXPECT_EQ(g.node(r).dtype, op == OpKind::LessThan ? DType::Bool : ta);
  g.output("out", edge(g, r));
  return run(std::move(g), {{"a", std::move(a)}, {"b", std::move(b)}}).output("out");
}
Buffer f32s(OpKind op, std::vector<float> a, std::vector<float> b) {
  Shape s{static_cast<int64_t>(a.size())};
  return binary(op, DType::F32, Buffer::f32(a, s), DType::F32, Buffer::f32(b, s));
}
Buffer i32s(OpKind op, std::vector<int32_t> a, std::vector<int32_t> b) {
  Shape s{static_cast<int64_t>(a.size())};
  return binary(op, DType::I32, Buffer::i32(a, s), DType::I32, Buffer::i32(b, s));
}
Buffer bools(OpKind op, std::vector<bool> a, std::vector<bool> b) {
  Shape s{static_cast<int64_t>(a.size())};
  return binary(op, DType::Bool, Buffer::boolean(a, s), DType::Bool, Buffer::boolean(b, s));
}
int32_t wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

}  // namespace

TEST(GraphBinary, F32MatchesNaiveLoop) {
  std::vector<float> a = random_floats(300, -50, 50, 1), b = random_floats(300, -50, 50, 2);
  for (OpKind op : {OpKind::Add, OpKind::Mul, OpKind::Mod}) {
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      want[i] = op == OpKind::Add ? a[i] + b[i] : op == OpKind::Mul ? a[i] * b[i] : std::fmod(a[i], b[i]);
    EXPECT_FLOATS_SAME(f32s(op, a, b).to_f32(), want) << luminal::op_name(op);
  }
  Buffer lt = f32s(OpKind::LessThan, a, b);
  EXPECT_EQ(lt.dtype(), DType::Bool);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(lt.get(i), a[i] < b[i] ? 1.0 : 0.0) << i;
}

TEST(GraphBinary, FloatModIsFmod) {
  EXPECT_FLOATS_SAME(f32s(OpKind::Mod, {5.5f, -5.5f, 5.5f, -5.5f, 1, INFINITY, 3, -0.0f}, {2, 2, -2, -2, 0, 1, INFINITY, 5}).to_f32(),
                     (std::vector<float>{1.5f, -1.5f, 1.5f, -1.5f, NAN, NAN, 3, -0.0f}));
}

TEST(GraphBinary, FloatSpecialValues) {
  EXPECT_FLOATS_SAME(f32s(OpKind::Add, {INFINITY, 1, NAN}, {-INFINITY, -1, 0}).to_f32(), (std::vector<float>{NAN, 0, NAN}));
  EXPECT_FLOATS_SAME(f32s(OpKind::Mul, {0, -2, 1e30f}, {INFINITY, 0, 1e30f}).to_f32(), (std::vector<float>{NAN, -0.0f, INFINITY}));
  Buffer lt = f32s(OpKind::LessThan, {NAN, 1, -INFINITY, -0.0f}, {1, NAN, INFINITY, 0.0f});
  EXPECT_EQ(lt.to_i32(), (std::vector<int32_t>{0, 0, 1, 0}));
}

TEST(GraphBinary, I32AddAndMulWrapAround) {
  std::vector<int32_t> a{INT_MAX, INT_MIN, 65536, 46341, INT_MIN, -7, 123456789};
  std::vector<int32_t> b{1, -1, 65536, 46341, -1, 3, 987654321};
  std::vector<int32_t> sum(a.size()), prod(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    sum[i] = wrap(int64_t{a[i]} + b[i]);
    prod[i] = wrap(int64_t{a[i]} * b[i]);
  }
  EXPECT_EQ(i32s(OpKind::Add, a, b).to_i32(), sum);
  EXPECT_EQ(i32s(OpKind::Mul, a, b).to_i32(), prod);
  // Spot checks by hand.
  EXPECT_EQ(sum[0], INT_MIN);
  EXPECT_EQ(sum[1], INT_MAX);
  EXPECT_EQ(prod[2], 0);
  EXPECT_EQ(prod[3], -2147479015);
  EXPECT_EQ(prod[4], INT_MIN);
}

TEST(GraphBinary, I32ModTruncatesAndModByZeroIsZero) {
  Buffer r = i32s(OpKind::Mod, {7, -7, 7, -7, 5, INT_MIN, INT_MIN, 0, INT_MAX, -1},
                  {3, 3, -3, -3, 0, -1, 0, 5, 2, INT_MIN});
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{1, -1, 1, -1, 0, 0, 0, 0, 1, -1}));
}

TEST(GraphBinary, I32RandomMatchesCSemantics) {
  std::vector<int32_t> a = random_ints(500, INT_MIN, INT_MAX, 3), b = random_ints(500, -100, 100, 4);
  std::vector<int32_t> mod(a.size()), lt(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    mod[i] = b[i] == 0 ? 0 : static_cast<int32_t>(int64_t{a[i]} % b[i]);
    lt[i] = a[i] < b[i];
  }
  EXPECT_EQ(i32s(OpKind::Mod, a, b).to_i32(), mod);
  EXPECT_EQ(i32s(OpKind::LessThan, a, b).to_i32(), lt);
}

TEST(GraphBinary, BoolAddIsOrMulIsAnd) {
  std::vector<bool> a{false, false, true, true}, b{false, true, false, true};
  Buffer any = bools(OpKind::Add, a, b), all = bools(OpKind::Mul, a, b), lt = bools(OpKind::LessThan, a, b);
  EXPECT_EQ(any.dtype(), DType::Bool);
  EXPECT_EQ(any.to_i32(), (std::vector<int32_t>{0, 1, 1, 1}));
  EXPECT_EQ(all.to_i32(), (std::vector<int32_t>{0, 0, 0, 1}));
  EXPECT_EQ(lt.to_i32(), (std::vector<int32_t>{0, 1, 0, 0}));
}

TEST(GraphBinary, BoolModIsRejected) {
  Graph g;
  NodeId x = g.input("x", DType::Bool, exprs({2}));
  EXPECT_LM_ERROR(g.binary(OpKind::Mod, edge(g, x), edge(g, x)), "Mod", "bool");
}

TEST(GraphBinary, RightOperandTakesTheLeftDtype) {
  Shape s{4};
  // i32 + f32: the right side is truncated toward zero first; the result is i32.
  Buffer r = binary(OpKind::Add, DType::I32, Buffer::i32({1, 2, -3, 0}, s), DType::F32, Buffer::f32({0.9f, -1.7f, 2.5f, NAN}, s));
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{1, 1, -1, 0}));
  // f32 + i32: f32 result.
  r = binary(OpKind::Mul, DType::F32, Buffer::f32({0.5f, 1.5f, -2, 3}, s), DType::I32, Buffer::i32({3, 3, 3, 3}, s));
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{1.5f, 4.5f, -6, 9}));
  // i32 < f32 compares against the truncated right side: 2 < trunc(2.5) is false.
  r = binary(OpKind::LessThan, DType::I32, Buffer::i32({2, 2, -1, 1}, s), DType::F32, Buffer::f32({2.5f, 3.0f, -0.5f, 1e10f}, s));
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{0, 1, 1, 1}));
  // f16 < f32: 1.0001 becomes f16 1.0 first, so 1 < 1.0001 is false.
  r = binary(OpKind::LessThan, DType::F16, Buffer::f32({1, 1, 1, 1}, s), DType::F32, Buffer::f32({1.0001f, 1.001f, 0.9999f, 2}, s));
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{0, 1, 0, 1}));
  // f16 * f32: 3 * f16(1 + 2^-11 + 2^-20) = 3 * (1 + 2^-10) = 3 + 1.5*2^-9, a tie, rounds to 3 + 2^-8.
  // (Rounding only the exact product would give 3 + 2^-9.)
  r = binary(OpKind::Mul, DType::F16, Buffer::f32({3, 3, 3, 3}, s), DType::F32, Buffer::f32({1 + 0x1p-11f + 0x1p-20f, 1, 2, 0.5f}, s));
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{3 + 0x1p-8f, 3, 6, 1.5f}));
  // bool + f32: the right side becomes x != 0 (NaN is true).
  r = binary(OpKind::Add, DType::Bool, Buffer::boolean({false, false, false, true}, s), DType::F32, Buffer::f32({0, -0.0f, NAN, 0}, s));
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{0, 0, 1, 1}));
}

TEST(GraphBinary, HalfPrecisionResultsAreRounded) {
  Shape s{3};
  // f16 ulp at 2048 is 2: 2048 + 1 is a tie (to 2048), 2050 + 1 is a tie (to 2052).
  Buffer r = binary(OpKind::Add, DType::F16, Buffer::f32({2048, 2050, 65504}, s), DType::F16, Buffer::f32({1, 1, 16}, s));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{2048, 2052, INFINITY}));
  // bf16: 1 + 2^-8 ties to 1; 1 + 3*2^-8 ties to 1 + 2^-6.
  r = binary(OpKind::Add, DType::BF16, Buffer::f32({1, 1 + 0x1p-7f, 256}, s), DType::BF16, Buffer::f32({0x1p-8f, 0x1p-8f, 1}, s));
  EXPECT_EQ(r.dtype(), DType::BF16);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{1, 1 + 0x1p-6f, 256}));
}

TEST(GraphBinary, ShapeMismatchIsRejected) {
  Graph g;
  NodeId a = g.input("a", DType::F32, exprs({2, 3})), b = g.input("b", DType::F32, exprs({3, 2}));
  NodeId c = g.input("c", DType::F32, exprs({2, 3, 1}));
  EXPECT_LM_ERROR(g.binary(OpKind::Add, edge(g, a), edge(g, b)), "Add", "[2, 3]", "[3, 2]");
  EXPECT_LM_ERROR(g.binary(OpKind::LessThan, edge(g, a), edge(g, c)), "LessThan", "[2, 3]", "[2, 3, 1]");
  Graph h;
  NodeId x = h.input("x", DType::F32, {Expr::var("s"), 3}), y = h.input("y", DType::F32, {Expr::var("t"), 3});
  EXPECT_LM_ERROR(h.binary(OpKind::Mul, edge(h, x), edge(h, y)), "Mul", "[s, 3]", "[t, 3]");
  EXPECT_NO_THROW(h.binary(OpKind::Mul, edge(h, x), edge(h, x)));
}
