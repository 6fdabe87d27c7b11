// dump() and to_dot() text formats.
#include <sstream>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> r;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) r.push_back(l);
  return r;
}
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}
bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The text outside double-quoted strings (escaped quotes stay inside); `balanced` is false when
// a string is left open.
std::string unquoted(const std::string& s, bool* balanced) {
  std::string r;
  bool in = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (in && s[i] == '\\') { ++i; continue; }
    if (s[i] == '"') { in = !in; continue; }
    if (!in) r += s[i];
  }
  *balanced = !in;
  return r;
}

// Graphviz-level checks: quotes balance on every line, braces balance outside strings.
void expect_valid_dot(const std::string& dot) {
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot;
  std::string outside;
  for (const std::string& l : lines(dot)) {
    bool balanced = false;
    outside += unquoted(l, &balanced) + "\n";
    EXPECT_TRUE(balanced) << l;
  }
  EXPECT_EQ(count(outside, "{"), 1u) << outside;
  EXPECT_EQ(count(outside, "}"), 1u) << outside;
  EXPECT_EQ(outside.substr(outside.size() - 2), "}\n") << outside;
}

Graph sample() {
  Graph g;
  NodeId x = g.input("x", DType::BF16, {Expr::var("s"), 3});
  NodeId c = g.constant(2.5f);
  NodeId m = g.binary(OpKind::Mul, edge(g, x), edge(c, View().broadcast_to({Expr::var("s"), 3})));
  NodeId r = g.reduce(OpKind::MaxReduce, edge(g, m), 1);
  NodeId i = g.iota(Expr::index() * 2, 4);
  NodeId cast = g.cast(edge(g, i), DType::F32);
  g.output("max", edge(g, r));
  g.output("idx", edge(cast, contiguous({4}).slice(0, 1, 3)));
  return g;
}

}  // namespace

TEST(GraphDump, OneLinePerNodeWithOpDtypeAndShape) {
  Graph g = sample();
  std::vector<std::string> ls = lines(g.dump());
  ASSERT_EQ(ls.size(), g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const std::string& l = ls[id];
    const luminal::Node& n = g.node(id);
    EXPECT_EQ(l.rfind("%" + std::to_string(id) + " = ", 0), 0u) << l;
    EXPECT_TRUE(contains(l, luminal::op_name(n.op))) << l;
    EXPECT_TRUE(contains(l, std::string(luminal::dtype_name(n.dtype)) + luminal::to_string(n.shape))) << l;
    for (const Edge& e : n.inputs) {
      EXPECT_TRUE(contains(l, "%" + std::to_string(e.src))) << l;
      if (!e.view.is_contiguous()) {
        EXPECT_TRUE(contains(l, e.view.to_string())) << l;  // views are shown
      }
    }
  }
  EXPECT_TRUE(contains(ls[0], "\"x\"")) << ls[0];
  EXPECT_TRUE(contains(ls[0], "bf16[s, 3]")) << ls[0];
  EXPECT_TRUE(contains(ls[1], "2.5")) << ls[1];
  EXPECT_TRUE(contains(ls[3], "axis=1")) << ls[3];
  EXPECT_TRUE(contains(ls[3], "bf16[s]")) << ls[3];
  EXPECT_TRUE(contains(ls[4], "i32[4]")) << ls[4];
  EXPECT_TRUE(contains(ls[7], "\"idx\"")) << ls[7];
  EXPECT_TRUE(contains(ls[7], "f32[2]")) << ls[7];
}

TEST(GraphDump, EmptyGraph) {
  Graph g;
  EXPECT_EQ(g.dump(), "");
  std::string dot = g.to_dot();
  expect_valid_dot(dot);
  EXPECT_EQ(count(dot, "->"), 0u);
}

TEST(GraphDot, HasANodePerNodeAndAnEdgePerInput) {
  Graph g = sample();
  std::string dot = g.to_dot();
  expect_valid_dot(dot);
  size_t edges = 0;
  for (NodeId id = 0; id < g.size(); ++id) {
    EXPECT_TRUE(contains(dot, "  n" + std::to_string(id) + " [label=")) << id;
    for (const Edge& e : g.node(id).inputs) {
      EXPECT_TRUE(contains(dot, "  n" + std::to_string(e.src) + " -> n" + std::to_string(id) + " ")) << e.src << "->" << id;
      ++edges;
    }
  }
  EXPECT_EQ(count(dot, " -> "), edges);
}

TEST(GraphDot, EscapesQuotesInNames) {
  Graph g;
  NodeId x = g.input("a\"b", DType::F32, exprs({1}));
  g.output("o\\ut", edge(g, x));
  std::string dot = g.to_dot();
  EXPECT_TRUE(contains(dot, "\\\"a\\\"b\\\"")) << dot;
  EXPECT_TRUE(contains(dot, "o\\\\ut")) << dot;
  expect_valid_dot(dot);
}
