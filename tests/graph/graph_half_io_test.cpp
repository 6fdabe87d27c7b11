// bf16 / f16 inputs and outputs: buffers are converted on the way in, results are rounded.
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

TEST(GraphHalfIO, InputsAreRoundedToTheirDtype) {
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<float> xs = random_floats(64, -300, 300, 9);
    xs.push_back(1e6f);
    Shape s{static_cast<int64_t>(xs.size())};
    Interpreter it = run_unary_graph(t, s, Buffer::f32(xs, s), [](Graph&, NodeId x) { return x; });
    const Buffer& out = it.output("out");
    EXPECT_EQ(out.dtype(), t);
    EXPECT_EQ(out.nbytes(), xs.size() * 2);
    std::vector<float> want;
    for (float v : xs) want.push_back(luminal::round_to(t, v));
    EXPECT_FLOATS_SAME(out.to_f32(), want);
    EXPECT_FLOATS_SAME(it.output_f32("out"), want);
  }
}

TEST(GraphHalfIO, ResultsOfComputeOpsAreRounded) {
  // (a * b) + c in bf16: every intermediate is rounded to bf16.
  Shape s{50};
  std::vector<float> a = random_floats(50, -4, 4, 1), b = random_floats(50, -4, 4, 2), c = random_floats(50, -4, 4, 3);
  for (DType t : {DType::F16, DType::BF16}) {
    Graph g;
    NodeId x = g.input("a", t, exprs(s)), y = g.input("b", t, exprs(s)), z = g.input("c", t, exprs(s));
    NodeId m = g.binary(OpKind::Mul, edge(g, x), edge(g, y));
    NodeId r = g.binary(OpKind::Add, edge(g, m), edge(g, z));
    g.output("out", edge(g, r));
    Interpreter it = run(std::move(g), {{"a", Buffer::f32(a, s)}, {"b", Buffer::f32(b, s)}, {"c", Buffer::f32(c, s)}});
    std::vector<float> want;
    auto q = [t](float v) { return luminal::round_to(t, v); };
    for (size_t i = 0; i < a.size(); ++i) want.push_back(q(q(q(a[i]) * q(b[i])) + q(c[i])));
    EXPECT_EQ(it.output("out").dtype(), t);
    EXPECT_FLOATS_SAME(it.output("out").to_f32(), want) << luminal::dtype_name(t);
  }
}

TEST(GraphHalfIO, InputBufferOfAnotherDtypeIsConverted) {
  // An i32 buffer given to an f16 input, and an f32 buffer given to an i32 input.
  Graph g;
  NodeId h = g.input("h", DType::F16, exprs({3}));
  NodeId i = g.input("i", DType::I32, exprs({3}));
  g.output("h_out", edge(g, h));
  g.output("i_out", edge(g, i));
  Interpreter it = run(std::move(g), {{"h", Buffer::i32({2049, -7, 70000}, {3})}, {"i", Buffer::f32({2.7f, -2.7f, NAN}, {3})}});
  EXPECT_EQ(it.output("h_out").dtype(), DType::F16);
  EXPECT_FLOATS_SAME(it.output_f32("h_out"), (std::vector<float>{2048, -7, INFINITY}));
  EXPECT_EQ(it.output_as<int32_t>("i_out"), (std::vector<int32_t>{2, -2, 0}));
}

TEST(GraphHalfIO, OutputAsNeedsTheExactDtype) {
  Shape s{2};
  Interpreter it = run_unary_graph(DType::BF16, s, Buffer::f32({1.5f, 3}, s), [](Graph& g, NodeId x) {
    return g.unary(OpKind::Sqrt, edge(g, x));
  });
  EXPECT_LM_ERROR(it.output_as<float>("out"), "out", "bf16", "f32");
  Buffer f = it.read_output("out", DType::F32);
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_FLOATS_SAME(f.to_f32(), (std::vector<float>{luminal::round_to(DType::BF16, std::sqrt(1.5f)), luminal::round_to(DType::BF16, std::sqrt(3.0f))}));
}
