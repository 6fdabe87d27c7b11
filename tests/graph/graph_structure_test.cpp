// Builder results (dtypes and shapes of each op), inputs/outputs, find_input/find_output, dims().
#include "graph/hlir_test_util.h"

using namespace hlirtest;

TEST(GraphStructure, BuildersSetOpDtypeAndShape) {
  Graph g;
  Expr s = Expr::var("s");
  NodeId x = g.input("x", DType::BF16, {s, 4});
  NodeId i = g.input("i", DType::I32, exprs({6}));
  EXPECT_EQ(g.node(x).op, OpKind::Input);
  EXPECT_EQ(g.node(x).name, "x");
  NodeId c = g.cast(edge(g, x), DType::F32);
  EXPECT_EQ(g.node(c).dtype, DType::F32);
  NodeId e = g.unary(OpKind::Exp2, edge(g, x));
  EXPECT_EQ(g.node(e).dtype, DType::BF16);
  NodeId lt = g.binary(OpKind::LessThan, edge(g, x), edge(g, c));
  EXPECT_EQ(g.node(lt).dtype, DType::Bool);
  NodeId add = g.binary(OpKind::Add, edge(g, c), edge(g, x));
  EXPECT_EQ(g.node(add).dtype, DType::F32);
  NodeId red = g.reduce(OpKind::MaxReduce, edge(x, View::contiguous({s, 4}).permute({1, 0})), 1);
  EXPECT_EQ(g.node(red).shape, exprs({4}));
  EXPECT_EQ(g.node(red).axis, 1u);
  NodeId red0 = g.reduce(OpKind::SumReduce, edge(g, x), 1);
  EXPECT_EQ(g.node(red0).shape, std::vector<Expr>{s});
  NodeId ga = g.gather(edge(i, contiguous({6}).reshape(exprs({2, 3}))), edge(g, x));
  EXPECT_EQ(g.node(ga).shape, exprs({2, 3}));
  EXPECT_EQ(g.node(ga).dtype, DType::BF16);
  NodeId io = g.iota(Expr::index() * 2, s + 1);
  EXPECT_EQ(g.node(io).shape, std::vector<Expr>{s + 1});
  NodeId out = g.output("o", edge(x, View::contiguous({s, 4}).slice(1, 1, 3)));
  EXPECT_EQ(g.node(out).shape, (std::vector<Expr>{s, 2}));
  EXPECT_EQ(g.node(out).dtype, DType::BF16);
  EXPECT_EQ(g.node(out).inputs.size(), 1u);
  EXPECT_EQ(g.node(out).inputs[0].src, x);
}

TEST(GraphStructure, InputsAndOutputsInCreationOrder) {
  Graph g;
  NodeId b = g.input("b", DType::F32, exprs({2}));
  NodeId a = g.input("a", DType::F32, exprs({2}));
  NodeId o2 = g.output("z", edge(g, a));
  NodeId o1 = g.output("y", edge(g, b));
  EXPECT_EQ(g.inputs(), (std::vector<NodeId>{b, a}));
  EXPECT_EQ(g.outputs(), (std::vector<NodeId>{o2, o1}));
  EXPECT_EQ(g.find_input("a"), a);
  EXPECT_EQ(g.find_input("b"), b);
  EXPECT_EQ(g.find_output("z"), o2);
  EXPECT_EQ(g.find_output("y"), o1);
  EXPECT_EQ(g.size(), 4u);
}

TEST(GraphStructure, FindMissingNamesListsWhatExists) {
  Graph g;
  NodeId x = g.input("tokens", DType::I32, exprs({2}));
  g.input("weights", DType::F32, exprs({2}));
  g.output("logits", edge(g, x));
  EXPECT_LM_ERROR(g.find_input("tokenz"), "tokenz", "tokens", "weights");
  EXPECT_LM_ERROR(g.find_output("logit"), "logit", "logits");
  EXPECT_LM_ERROR(g.find_input("logits"), "logits", "tokens");  // outputs are not inputs
  EXPECT_LM_ERROR(g.find_output("tokens"), "tokens");
  Graph empty;
  EXPECT_LM_ERROR(empty.find_input("x"), "x", "(none)");
}

TEST(GraphStructure, DuplicateAndEmptyNamesAreRejected) {
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({2}));
  EXPECT_LM_ERROR(g.input("x", DType::I32, exprs({3})), "x", "already exists");
  EXPECT_LM_ERROR(g.input("", DType::I32, exprs({3})), "name");
  g.output("y", edge(g, x));
  EXPECT_LM_ERROR(g.output("y", edge(g, x)), "y", "already exists");
  EXPECT_LM_ERROR(g.input("z", DType::F32, {Expr::index()}), "z", "index");
}

TEST(GraphStructure, DimsAreCollectedFromShapesIotaAndViews) {
  Graph g;
  EXPECT_TRUE(g.dims().empty());
  Expr s = Expr::var("s"), k = Expr::var("k"), n = Expr::var("n"), a = Expr::var("a");
  NodeId x = g.input("x", DType::F32, {s, 3});
  NodeId io = g.iota(Expr::index() * k, n);  // k only in the expression
  g.output("sl", edge(x, View::contiguous({s, 3}).slice(0, a, s)));  // a only in the view
  g.output("io", edge(g, io));
  EXPECT_EQ(g.dims(), (std::vector<std::string>{"a", "k", "n", "s"}));
}

TEST(GraphStructure, DimsIncludeDimsUsedOnlyInViewMasks) {
  // A broadcast (stride 0) axis padded by p before and then sliced back: p survives only in the
  // view's mask (valid from p), not in its shape, strides or offset. It still decides what is
  // read, so dims() must report it. (Bug: dims() skips mask_lo / mask_hi.)
  Graph g;
  NodeId c = g.constant(5);
  View v = View().unsqueeze(0).expand(0, 4).pad(0, Expr::var("p"), 0, -1).slice(0, 0, 3);
  g.output("o", edge(c, v));
  EXPECT_EQ(g.dims(), std::vector<std::string>{"p"});
  // The value does depend on p: element i reads the constant when i >= p, else the pad value.
  Interpreter it(g);
  it.set_dim("p", 1);
  it.run();
  EXPECT_FLOATS_SAME(it.output_as<float>("o"), (std::vector<float>{-1, 5, 5}));
}
