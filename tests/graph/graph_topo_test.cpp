// topo_order and remove_dead.
#include <algorithm>
#include <map>

#include "graph/hlir_test_util.h"

using namespace hlirtest;
using luminal::Node;

namespace {

// A graph with live nodes and several dead ones (an unused input, a dangling branch, a constant).
struct Fixture {
  Graph g;
  NodeId x, w, unused, dead_exp, dead_c, mul, sum, out_sum, out_mul;
  Fixture() {
    x = g.input("x", DType::F32, exprs({2, 3}));
    unused = g.input("unused", DType::F32, exprs({5}));
    dead_exp = g.unary(OpKind::Exp2, edge(g, x));
    w = g.input("w", DType::F32, exprs({3}));
    dead_c = g.constant(4);
    mul = g.binary(OpKind::Mul, edge(g, x), edge(w, contiguous({3}).broadcast_to(exprs({2, 3}))));
    g.binary(OpKind::Add, edge(g, dead_exp), edge(g, x));  // dead too
    sum = g.reduce(OpKind::SumReduce, edge(g, mul), 1);
    out_sum = g.output("sum", edge(g, sum));
    out_mul = g.output("mul", edge(g, mul));
  }
};

std::vector<std::pair<std::string, Buffer>> inputs() {
  return {{"x", Buffer::f32(random_floats(6, -2, 2, 1), {2, 3})}, {"w", Buffer::f32({1, -2, 0.5f}, {3})}};
}

}  // namespace

TEST(GraphTopo, ProducersFirstAndOnlyReachableNodes) {
  Fixture f;
  std::vector<NodeId> order = f.g.topo_order();
  std::map<NodeId, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_TRUE(pos.emplace(order[i], i).second) << "node " << order[i] << " appears twice";
  }
  std::vector<NodeId> live{f.x, f.w, f.mul, f.sum, f.out_sum, f.out_mul};
  EXPECT_EQ(order.size(), live.size());
  for (NodeId id : live) EXPECT_TRUE(pos.count(id)) << "live node " << id << " missing";
  for (NodeId dead : {f.unused, f.dead_exp, f.dead_c}) EXPECT_FALSE(pos.count(dead)) << "dead node " << dead;
  for (NodeId id : order)
    for (const Edge& e : f.g.node(id).inputs) EXPECT_LT(pos.at(e.src), pos.at(id)) << e.src << " -> " << id;
}

TEST(GraphTopo, DiamondAndSharedInputs) {
  // x feeds both sides of a diamond and is used twice by one node.
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({4}));
  NodeId a = g.unary(OpKind::Sin, edge(g, x));
  NodeId b = g.unary(OpKind::Sqrt, edge(g, x));
  NodeId c = g.binary(OpKind::Add, edge(g, a), edge(g, b));
  NodeId d = g.binary(OpKind::Mul, edge(g, c), edge(g, c));
  NodeId o = g.output("o", edge(g, d));
  std::vector<NodeId> order = g.topo_order();
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.front(), x);
  EXPECT_EQ(order.back(), o);
  auto at = [&](NodeId id) { return std::find(order.begin(), order.end(), id) - order.begin(); };
  EXPECT_LT(at(a), at(c));
  EXPECT_LT(at(b), at(c));
  EXPECT_LT(at(c), at(d));
  Interpreter it = run(std::move(g), {{"x", Buffer::f32({0, 1, 4, 9}, {4})}});
  std::vector<float> want;
  for (float v : {0.0f, 1.0f, 4.0f, 9.0f}) {
    float t = std::sin(v) + std::sqrt(v);
    want.push_back(t * t);
  }
  EXPECT_FLOATS_SAME(it.output_as<float>("o"), want);
}

TEST(GraphTopo, NoOutputsMeansEmptyOrder) {
  Graph g;
  g.unary(OpKind::Exp2, edge(g, g.input("x", DType::F32, exprs({2}))));
  EXPECT_TRUE(g.topo_order().empty());
}

TEST(GraphTopo, RemoveDeadKeepsResults) {
  Fixture f;
  auto all_inputs = inputs();
  all_inputs.push_back({"unused", Buffer::f32(std::vector<float>(5, 0.0f), {5})});
  Interpreter before = run(f.g, all_inputs);
  Graph g = f.g;
  size_t old_size = g.size();
  std::vector<NodeId> remap = g.remove_dead();
  ASSERT_EQ(remap.size(), old_size);
  EXPECT_EQ(g.size(), 6u);
  for (NodeId dead : {f.unused, f.dead_exp, f.dead_c}) EXPECT_EQ(remap[dead], UINT32_MAX);
  for (NodeId live : {f.x, f.w, f.mul, f.sum, f.out_sum, f.out_mul}) {
    ASSERT_LT(remap[live], g.size());
    EXPECT_EQ(g.node(remap[live]).op, f.g.node(live).op);
    EXPECT_EQ(g.node(remap[live]).name, f.g.node(live).name);
  }
  // Renumbered in topological order: every edge points backwards, and to the remapped producer.
  for (NodeId old = 0; old < old_size; ++old) {
    if (remap[old] == UINT32_MAX) continue;
    const Node& n = g.node(remap[old]);
    ASSERT_EQ(n.inputs.size(), f.g.node(old).inputs.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      EXPECT_EQ(n.inputs[k].src, remap[f.g.node(old).inputs[k].src]);
      EXPECT_LT(n.inputs[k].src, remap[old]);
      EXPECT_EQ(n.inputs[k].view, f.g.node(old).inputs[k].view);
    }
  }
  EXPECT_EQ(g.inputs().size(), 2u);
  EXPECT_THROW(g.find_input("unused"), luminal::Error);
  // The pruned graph runs (without the dead input) and gives the same outputs.
  Interpreter after = run(g, inputs());
  for (const char* name : {"sum", "mul"}) EXPECT_FLOATS_SAME(after.output_as<float>(name), before.output_as<float>(name)) << name;
  // Pruning again changes nothing.
  std::vector<NodeId> again = g.remove_dead();
  EXPECT_EQ(g.size(), 6u);
  for (NodeId i = 0; i < again.size(); ++i) EXPECT_EQ(again[i], i);
}

TEST(GraphTopo, LongChainNeedsNoRecursion) {
  // 20000 dependent adds: topo_order is iterative, and the interpreter frees as it goes.
  Graph g;
  NodeId x = g.input("x", DType::I32, exprs({2}));
  NodeId cur = x;
  for (int i = 0; i < 20000; ++i) cur = g.binary(OpKind::Add, edge(g, cur), edge(g, x));
  g.output("out", edge(g, cur));
  EXPECT_EQ(g.topo_order().size(), 20002u);
  Interpreter it = run(std::move(g), {{"x", Buffer::i32({1, -3}, {2})}});
  EXPECT_EQ(it.output_as<int32_t>("out"), (std::vector<int32_t>{20001, -60003}));
}
