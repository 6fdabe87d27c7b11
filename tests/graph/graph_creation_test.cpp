// Constant, Iota (with symbolic expressions) and Cast.
#include <climits>
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

Buffer cast(DType from, Buffer x, DType to) {
  Shape s = x.shape();
  Interpreter it = run_unary_graph(from, s, std::move(x), [&](Graph& g, NodeId in) { return g.cast(edge(g, in), to); });
  EXPECT_EQ(it.output("out").dtype(), to);
  return it.output("out");
}

}  // namespace

TEST(GraphConstant, IsAnF32Scalar) {
  Graph g;
  NodeId c = g.constant(2.5f);
  EXPECT_EQ(g.node(c).dtype, DType::F32);
  EXPECT_TRUE(g.node(c).shape.empty());
  g.output("out", edge(g, c));
  Interpreter it = run(std::move(g), {});
  EXPECT_EQ(it.output("out").shape(), Shape{});
  EXPECT_FLOATS_SAME(it.output_as<float>("out"), std::vector<float>{2.5f});
}

TEST(GraphConstant, BroadcastIntoABinaryOp) {
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({2, 3}));
  NodeId c = g.constant(-1.5f);
  NodeId r = g.binary(OpKind::Mul, edge(g, x), edge(c, View().broadcast_to(exprs({2, 3}))));
  g.output("out", edge(g, r));
  std::vector<float> xs = arange_f(6);
  Interpreter it = run(std::move(g), {{"x", Buffer::f32(xs, {2, 3})}});
  std::vector<float> want;
  for (float v : xs) want.push_back(v * -1.5f);
  EXPECT_FLOATS_SAME(it.output_as<float>("out"), want);
}

TEST(GraphConstant, SpecialValues) {
  for (float v : {INFINITY, -INFINITY, NAN, -0.0f, 3.4028235e38f}) {
    Graph g;
    g.output("out", edge(g, g.constant(v)));
    EXPECT_FLOATS_SAME(run(std::move(g), {}).output_as<float>("out"), std::vector<float>{v});
  }
}

TEST(GraphIota, PlainIndex) {
  Graph g;
  NodeId i = g.iota(Expr::index(), 5);
  EXPECT_EQ(g.node(i).dtype, DType::I32);
  g.output("out", edge(g, i));
  EXPECT_EQ(run(std::move(g), {}).output_as<int32_t>("out"), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(GraphIota, SymbolicExpressionAndCount) {
  // element i = i * 3 + k (floor-divided by 2), n elements; k and n are dynamic dims.
  Expr z = Expr::index(), k = Expr::var("k"), n = Expr::var("n");
  Graph g;
  g.output("lin", edge(g, g.iota(z * 3 + k, n)));
  g.output("half", edge(g, g.iota((z * 3 + k) / 2, n)));
  g.output("mod", edge(g, g.iota(z % k, n)));
  Interpreter it(std::move(g));
  for (int64_t kv : {1, 5}) {
    for (int64_t nv : {0, 1, 4}) {
      it.set_dim("k", kv);
      it.set_dim("n", nv);
      it.run();
      std::vector<int32_t> lin, half, mod;
      for (int64_t i = 0; i < nv; ++i) {
        lin.push_back(static_cast<int32_t>(i * 3 + kv));
        half.push_back(static_cast<int32_t>((i * 3 + kv) / 2));
        mod.push_back(static_cast<int32_t>(i % kv));
      }
      EXPECT_EQ(it.output("lin").shape(), Shape{nv});
      EXPECT_EQ(it.output_as<int32_t>("lin"), lin) << kv << " " << nv;
      EXPECT_EQ(it.output_as<int32_t>("half"), half) << kv << " " << nv;
      EXPECT_EQ(it.output_as<int32_t>("mod"), mod) << kv << " " << nv;
    }
  }
}

TEST(GraphIota, NegativeValuesAndFloorDivision) {
  // 2 - i, and (i - 3) / 2 with floor semantics: -3/2 = -2.
  Expr z = Expr::index();
  Graph g;
  g.output("a", edge(g, g.iota(Expr(2) - z, 5)));
  g.output("b", edge(g, g.iota((z - 3) / 2, 5)));
  Interpreter it = run(std::move(g), {});
  EXPECT_EQ(it.output_as<int32_t>("a"), (std::vector<int32_t>{2, 1, 0, -1, -2}));
  EXPECT_EQ(it.output_as<int32_t>("b"), (std::vector<int32_t>{-2, -1, -1, 0, 0}));
}

TEST(GraphCast, FloatToI32TruncatesSaturatesNaNIsZero) {
  Shape s{8};
  Buffer r = cast(DType::F32, Buffer::f32({2.9f, -2.9f, 0.5f, 3e9f, -3e9f, NAN, INFINITY, -2147483648.0f}, s), DType::I32);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{2, -2, 0, INT_MAX, INT_MIN, 0, INT_MAX, INT_MIN}));
  // From half precision the value is rounded on input first: bf16(2.999) = 3.
  r = cast(DType::BF16, Buffer::f32({2.999f, -1.5f, 70000.0f, NAN, 0, 0, 0, 0}, s), DType::I32);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{3, -1, 70144, 0, 0, 0, 0, 0}));
}

TEST(GraphCast, ToBoolIsNonZeroAndNaNIsTrue) {
  Shape s{6};
  EXPECT_EQ(cast(DType::F32, Buffer::f32({0, -0.0f, 0.5f, NAN, -INFINITY, 1e-40f}, s), DType::Bool).to_i32(),
            (std::vector<int32_t>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(cast(DType::I32, Buffer::i32({0, 1, -1, INT_MIN, 0, 7}, s), DType::Bool).to_i32(),
            (std::vector<int32_t>{0, 1, 1, 1, 0, 1}));
}

TEST(GraphCast, BetweenFloatsRounds) {
  Shape s{5};
  std::vector<float> xs{1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 65520, 65519.99f, 0x1p-25f};
  EXPECT_FLOATS_SAME(cast(DType::F32, Buffer::f32(xs, s), DType::F16).to_f32(),
                     (std::vector<float>{1, 1 + 0x1p-9f, INFINITY, 65504, 0}));
  EXPECT_FLOATS_SAME(cast(DType::F32, Buffer::f32(xs, s), DType::BF16).to_f32(),
                     (std::vector<float>{1, 1, 65536, 65536, 0x1p-25f}));
  // bf16 -> f16: 2^-20 = 16 * 2^-24 is an exact f16 subnormal; 2^-26 is under half the smallest one.
  EXPECT_FLOATS_SAME(cast(DType::BF16, Buffer::f32({0x1p-20f, 1 + 0x1p-7f, 1e5f, -0.0f, 0x1p-26f}, s), DType::F16).to_f32(),
                     (std::vector<float>{0x1p-20f, 1 + 0x1p-7f, INFINITY, -0.0f, 0}));
}

TEST(GraphCast, FromIntAndBool) {
  Shape s{4};
  EXPECT_FLOATS_SAME(cast(DType::I32, Buffer::i32({-3, 0, 16777217, INT_MAX}, s), DType::F32).to_f32(),
                     (std::vector<float>{-3, 0, 16777216, 2147483648.0f}));
  EXPECT_FLOATS_SAME(cast(DType::I32, Buffer::i32({-3, 2049, 65519, 70000}, s), DType::F16).to_f32(),
                     (std::vector<float>{-3, 2048, 65504, INFINITY}));
  EXPECT_FLOATS_SAME(cast(DType::Bool, Buffer::boolean({true, false, true, false}, s), DType::F32).to_f32(),
                     (std::vector<float>{1, 0, 1, 0}));
  EXPECT_EQ(cast(DType::Bool, Buffer::boolean({true, false, true, false}, s), DType::I32).to_i32(),
            (std::vector<int32_t>{1, 0, 1, 0}));
}

TEST(GraphCast, SameDtypeIsIdentity) {
  Shape s{3};
  EXPECT_FLOATS_SAME(cast(DType::F32, Buffer::f32({1.25f, NAN, -0.0f}, s), DType::F32).to_f32(), (std::vector<float>{1.25f, NAN, -0.0f}));
  EXPECT_EQ(cast(DType::I32, Buffer::i32({INT_MIN, 0, INT_MAX}, s), DType::I32).to_i32(), (std::vector<int32_t>{INT_MIN, 0, INT_MAX}));
}
