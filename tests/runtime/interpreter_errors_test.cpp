// Errors a caller can cause, each a luminal::Error naming the thing.
#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

Graph simple() {
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({2, 3}));
  NodeId w = g.input("w", DType::F32, exprs({2, 3}));
  g.output("out", edge(g, g.binary(OpKind::Add, edge(g, x), edge(g, w))));
  return g;
}

}  // namespace

TEST(InterpreterErrors, UnknownInputListsTheInputs) {
  Interpreter it(simple());
  EXPECT_LM_ERROR(it.set_input("tokens", Buffer::f32({1}, {1})), "tokens", "x", "w");
}

TEST(InterpreterErrors, WrongRank) {
  Interpreter it(simple());
  EXPECT_LM_ERROR(it.set_input("x", Buffer::f32(arange_f(6), {6})), "'x'", "[2, 3]", "rank 2", "[6]");
  EXPECT_LM_ERROR(it.set_input("x", Buffer::f32(arange_f(6), {1, 2, 3})), "'x'", "[1, 2, 3]");
}

TEST(InterpreterErrors, ShapeMismatchNamesBothShapes) {
  Interpreter it(simple());
  it.set_input("x", Buffer::f32(arange_f(6), {3, 2}));
  it.set_input("w", Buffer::f32(arange_f(6), {2, 3}));
  EXPECT_LM_ERROR(it.run(), "'x'", "shape mismatch", "[2, 3]", "[3, 2]");
}

TEST(InterpreterErrors, InputNotSet) {
  Interpreter it(simple());
  it.set_input("x", Buffer::f32(arange_f(6), {2, 3}));
  EXPECT_LM_ERROR(it.run(), "'w'", "set_input");
}

TEST(InterpreterErrors, UnboundDynamicDim) {
  Graph g;
  g.output("r", edge(g, g.iota(Expr::index(), Expr::var("seq_len"))));
  Interpreter it(std::move(g));
  EXPECT_LM_ERROR(it.run(), "'seq_len'", "set_dim");
  EXPECT_LM_ERROR(it.set_dim("seq_len", -1), "seq_len", "-1");
}

TEST(InterpreterErrors, OutputReading) {
  Interpreter it(simple());
  it.set_input("x", Buffer::f32(arange_f(6), {2, 3}));
  it.set_input("w", Buffer::f32(random_floats(6, -2, 2, 1), {2, 3}));
  EXPECT_LM_ERROR(it.output("out"), "out", "run()");  // before run()
  it.run();
  EXPECT_LM_ERROR(it.output("nope"), "nope", "out");
  EXPECT_LM_ERROR(it.read_output("nope", DType::F32), "nope");
  EXPECT_LM_ERROR(it.output_as<int32_t>("out"), "out", "f32", "i32");
  EXPECT_LM_ERROR(it.output_as<bool>("out"), "out", "f32", "bool");
  // read_output converts instead: truncation toward zero.
  std::vector<float> f = it.output_as<float>("out");
  Buffer i = it.read_output("out", DType::I32);
  EXPECT_EQ(i.dtype(), DType::I32);
  for (size_t k = 0; k < f.size(); ++k) EXPECT_EQ(i.to_i32()[k], static_cast<int32_t>(f[k])) << f[k];
}

TEST(InterpreterErrors, BuilderErrorsNameTheOp) {
  Graph g;
  NodeId a = g.input("a", DType::F32, exprs({2, 3}));
  NodeId b = g.input("b", DType::F32, exprs({3}));
  NodeId i = g.input("i", DType::I32, exprs({3}));
  EXPECT_LM_ERROR(g.binary(OpKind::Add, edge(g, a), edge(g, b)), "Add", "[2, 3]", "[3]");
  EXPECT_LM_ERROR(g.reduce(OpKind::SumReduce, edge(g, a), 2), "SumReduce", "axis 2", "[2, 3]");
  EXPECT_LM_ERROR(g.unary(OpKind::Log2, edge(g, i)), "Log2", "i32");
  EXPECT_LM_ERROR(g.gather(edge(g, b), edge(g, a)), "Gather", "f32");
  // None of the failed builders added a node.
  EXPECT_EQ(g.size(), 3u);
}

TEST(InterpreterErrors, ConsumingAnOutputNodeIsRejectedOrWorks) {
  // The builders accept an edge from an Output node. Either that must be refused with an Error
  // when building, or the graph must run. (Bug: it builds, then run() throws std::out_of_range
  // from std::map::at, because Output results are not kept among the live buffers.)
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({3}));
  NodeId a = g.output("a", edge(g, x));
  NodeId r = 0;
  try {
    r = g.unary(OpKind::Sqrt, edge(g, a));
  } catch (const luminal::Error&) {
    SUCCEED() << "refused at build time";
    return;
  }
  g.output("b", edge(g, r));
  Interpreter it(std::move(g));
  it.set_input("x", Buffer::f32({1, 4, 9}, {3}));
  try {
    it.run();
  } catch (const luminal::Error& e) {
    ADD_FAILURE() << "a graph the builders accepted failed to run: " << e.what();
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "run() threw a non-luminal exception: " << e.what();
    return;
  }
  EXPECT_FLOATS_SAME(it.output_as<float>("a"), (std::vector<float>{1, 4, 9}));
  EXPECT_FLOATS_SAME(it.output_as<float>("b"), (std::vector<float>{1, 2, 3}));
}
