// Dynamic dims: shapes bound from input buffers or set_dim, persistent inputs across runs.
#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

// y[i] = sum_j x[i, j] * w[j] for x [s, 3], plus pos = iota(i * 10, s) and x transposed.
Graph rowdot() {
  Graph g;
  Expr s = Expr::var("s");
  NodeId x = g.input("x", DType::F32, {s, 3});
  NodeId w = g.input("w", DType::F32, exprs({3}));
  NodeId m = g.binary(OpKind::Mul, edge(g, x), edge(w, contiguous({3}).broadcast_to({s, 3})));
  g.output("y", edge(g, g.reduce(OpKind::SumReduce, edge(g, m), 1)));
  g.output("pos", edge(g, g.iota(Expr::index() * 10, s)));
  g.output("xt", edge(x, View::contiguous({s, 3}).permute({1, 0})));
  return g;
}

void expect_rowdot(const Interpreter& it, const std::vector<float>& x, const std::vector<float>& w) {
  int64_t s = static_cast<int64_t>(x.size() / 3);
  std::vector<float> y, xt;
  std::vector<int32_t> pos;
  for (int64_t i = 0; i < s; ++i) {
    float acc = 0;
    for (int j = 0; j < 3; ++j) acc += x[i * 3 + j] * w[j];
    y.push_back(acc);
    pos.push_back(static_cast<int32_t>(i * 10));
  }
  for (int j = 0; j < 3; ++j)
    for (int64_t i = 0; i < s; ++i) xt.push_back(x[i * 3 + j]);
  EXPECT_EQ(it.output("y").shape(), Shape{s});
  EXPECT_EQ(it.output("pos").shape(), Shape{s});
  EXPECT_EQ(it.output("xt").shape(), (Shape{3, s}));
  EXPECT_FLOATS_SAME(it.output_as<float>("y"), y);
  EXPECT_EQ(it.output_as<int32_t>("pos"), pos);
  EXPECT_FLOATS_SAME(it.output_as<float>("xt"), xt);
}

}  // namespace

TEST(InterpreterDynamic, DimInferredFromTheInputBuffer) {
  Interpreter it(rowdot());
  std::vector<float> w{0.5f, -1, 2};
  it.set_input("w", Buffer::f32(w, {3}));  // set once
  for (int64_t s : {1, 2, 5, 0, 2}) {
    std::vector<float> x = random_floats(s * 3, -3, 3, static_cast<uint32_t>(s));
    it.set_input("x", Buffer::f32(x, {s, 3}));
    it.run();
    EXPECT_EQ(it.dims().at("s"), s);
    expect_rowdot(it, x, w);
  }
}

TEST(InterpreterDynamic, DimViaSetDim) {
  Interpreter it(rowdot());
  std::vector<float> w{1, 2, 3};
  it.set_input("w", Buffer::f32(w, {3}));
  for (int64_t s : {1, 2, 5}) {
    std::vector<float> x = random_floats(s * 3, -3, 3, static_cast<uint32_t>(s + 100));
    it.set_dim("s", s);
    it.set_input("x", Buffer::f32(x, {s, 3}));
    it.run();
    expect_rowdot(it, x, w);
  }
  // An explicit dim wins over the buffer: a buffer of another size is then a shape mismatch.
  it.set_input("x", Buffer::f32(arange_f(6), {2, 3}));
  EXPECT_LM_ERROR(it.run(), "x", "[s, 3]", "[5, 3]", "[2, 3]");
}

TEST(InterpreterDynamic, InputsPersistAcrossRuns) {
  Interpreter it(rowdot());
  std::vector<float> w{2, 0, -1}, x1 = arange_f(6), x2 = random_floats(6, -1, 1, 3);
  it.set_input("w", Buffer::f32(w, {3}));
  it.set_input("x", Buffer::f32(x1, {2, 3}));
  it.run();
  expect_rowdot(it, x1, w);
  it.run();  // nothing changed: same results
  expect_rowdot(it, x1, w);
  it.set_input("x", Buffer::f32(x2, {2, 3}));
  it.run();
  expect_rowdot(it, x2, w);
  // Replacing the weights is seen by the next run too.
  std::vector<float> w2{1, 1, 1};
  it.set_input("w", Buffer::f32(w2, {3}));
  it.run();
  expect_rowdot(it, x2, w2);
}

TEST(InterpreterDynamic, DimOnlyInAComputedShape) {
  // n appears only as an iota length (not in any input), so it must come from set_dim.
  Graph g;
  g.output("r", edge(g, g.iota(Expr::index() + 1, Expr::var("n") * 2)));
  Interpreter it(std::move(g));
  it.set_dim("n", 3);
  it.run();
  EXPECT_EQ(it.output_as<int32_t>("r"), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  it.set_dim("n", 0);
  it.run();
  EXPECT_EQ(it.output("r").numel(), 0u);
}

TEST(InterpreterDynamic, SameDimInTwoInputs) {
  Graph g;
  Expr s = Expr::var("s");
  NodeId a = g.input("a", DType::F32, {s});
  NodeId b = g.input("b", DType::F32, {s});
  g.output("sum", edge(g, g.binary(OpKind::Add, edge(g, a), edge(g, b))));
  Interpreter it(std::move(g));
  it.set_input("a", Buffer::f32({1, 2, 3}, {3}));
  it.set_input("b", Buffer::f32({10, 20, 30}, {3}));
  it.run();
  EXPECT_FLOATS_SAME(it.output_as<float>("sum"), (std::vector<float>{11, 22, 33}));
  it.set_input("b", Buffer::f32({10, 20}, {2}));  // disagrees with a
  EXPECT_LM_ERROR(it.run(), "shape mismatch", "[3]", "[2]");
}
