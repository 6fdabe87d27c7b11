// Exp2, Log2, Sin, Sqrt, Recip on the interpreter against a naive loop, in f32, f16 and bf16.
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

float naive(OpKind op, float x) {
  switch (op) {
    case OpKind::Exp2: return std::exp2(x);
    case OpKind::Log2: return std::log2(x);
    case OpKind::Sin: return std::sin(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Recip: return 1.0f / x;
    default: return NAN;
  }
}

const OpKind kUnary[] = {OpKind::Exp2, OpKind::Log2, OpKind::Sin, OpKind::Sqrt, OpKind::Recip};

std::vector<float> run_op(OpKind op, DType t, const std::vector<float>& xs) {
  Shape s{static_cast<int64_t>(xs.size())};
  Interpreter it = run_unary_graph(t, s, Buffer::f32(xs, s), [&](Graph& g, NodeId x) { return g.unary(op, edge(g, x)); });
  EXPECT_EQ(it.output("out").dtype(), t);
  return it.output("out").to_f32();
}

}  // namespace

TEST(GraphUnary, F32MatchesNaiveLoop) {
  std::vector<float> xs = random_floats(200, -20.0f, 20.0f, 7);
  for (float special : {0.0f, -0.0f, 1.0f, 0.25f, -1.0f, INFINITY, -INFINITY, NAN, 1e-30f}) xs.push_back(special);
  for (OpKind op : kUnary) {
    SCOPED_TRACE(luminal::op_name(op));
    std::vector<float> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = naive(op, xs[i]);
    EXPECT_FLOATS_SAME(run_op(op, DType::F32, xs), want);
  }
}

TEST(GraphUnary, HandComputedValues) {
  EXPECT_FLOATS_SAME(run_op(OpKind::Exp2, DType::F32, {0, 3, -1, -INFINITY}), (std::vector<float>{1, 8, 0.5f, 0}));
  EXPECT_FLOATS_SAME(run_op(OpKind::Log2, DType::F32, {1, 8, 0.5f, 0, -1}), (std::vector<float>{0, 3, -1, -INFINITY, NAN}));
  EXPECT_FLOATS_SAME(run_op(OpKind::Sqrt, DType::F32, {4, 2.25f, -0.0f, -4}), (std::vector<float>{2, 1.5f, -0.0f, NAN}));
  EXPECT_FLOATS_SAME(run_op(OpKind::Recip, DType::F32, {4, -0.5f, 0, -0.0f}), (std::vector<float>{0.25f, -2, INFINITY, -INFINITY}));
  EXPECT_FLOATS_SAME(run_op(OpKind::Sin, DType::F32, {0, -0.0f, INFINITY}), (std::vector<float>{0, -0.0f, NAN}));
}

TEST(GraphUnary, HalfPrecisionRoundsInputsAndResults) {
  std::vector<float> xs = random_floats(100, 0.1f, 10.0f, 11);
  for (DType t : {DType::F16, DType::BF16}) {
    for (OpKind op : kUnary) {
      SCOPED_TRACE(std::string(luminal::op_name(op)) + " " + luminal::dtype_name(t));
      std::vector<float> want(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) want[i] = luminal::round_to(t, naive(op, luminal::round_to(t, xs[i])));
      EXPECT_FLOATS_SAME(run_op(op, t, xs), want);
    }
  }
  // Hand-checked: sqrt(2) in bf16 is 1.4140625 (0x3fb5), in f16 1.4140625 too (0x3da8).
  EXPECT_FLOATS_SAME(run_op(OpKind::Sqrt, DType::BF16, {2}), std::vector<float>{1.4140625f});
  EXPECT_FLOATS_SAME(run_op(OpKind::Sqrt, DType::F16, {2}), std::vector<float>{1.4140625f});
  EXPECT_FLOATS_SAME(run_op(OpKind::Exp2, DType::F16, {16}), std::vector<float>{INFINITY});  // 65536 overflows
}

TEST(GraphUnary, NonFloatInputIsRejected) {
  for (DType t : {DType::I32, DType::Bool}) {
    Graph g;
    NodeId x = g.input("x", t, exprs({3}));
    EXPECT_LM_ERROR(g.unary(OpKind::Exp2, edge(g, x)), "Exp2", luminal::dtype_name(t));
    EXPECT_LM_ERROR(g.unary(OpKind::Sqrt, edge(g, x)), "Sqrt", luminal::dtype_name(t));
  }
}
