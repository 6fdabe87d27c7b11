// Layer dedup: repeated blocks are found by structure, compiled once, and the stitched plan
// computes what the original graph computes.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compile.h"
#include "compiler/dedup.h"
#include "models/llama_graph.h"
#include "runtime/interpreter.h"

using namespace luminal;

namespace {

// N residual MLP blocks over a dynamic batch, each with its own weights.
Graph mlp_stack(int blocks) {
  Graph g;
  Expr b = Expr::var("b");
  Tensor h = input(g, "x", DType::F32, {b, 8});
  Tensor scale = input(g, "scale", DType::F32, {8});  // shared by every block
  for (int i = 0; i < blocks; ++i) {
    std::string p = "blk" + std::to_string(i) + ".";
    Tensor w1 = input(g, p + "w1", DType::F32, {16, 8});
    Tensor w2 = input(g, p + "w2", DType::F32, {8, 16});
    Tensor y = rms_norm(h, scale, 1e-6);
    h = h + linear(gelu(linear(y, w1, std::nullopt)), w2, std::nullopt);
    (h * 1.0).output(p + "out");
  }
  softmax(h, -1).output("probs");
  return g;
}

void fill_inputs(Interpreter& rt, const Graph& g, const DimMap& dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-0.5f, 0.5f);
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    std::vector<int64_t> shape;
    for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
    Buffer buf(n.dtype, shape);
    for (size_t i = 0; i < buf.numel(); ++i)
      buf.set(i, n.dtype == DType::I32 ? static_cast<double>(rng() % 7) : static_cast<double>(val(rng)));
    rt.set_input(n.name, std::move(buf));
  }
  for (auto& [k, v] : dims) rt.set_dim(k, v);
}

void expect_same_outputs(const Graph& a, const Graph& b, const DimMap& dims) {
  Interpreter ra(a), rb(b);
  fill_inputs(ra, a, dims, 5);
  fill_inputs(rb, a, dims, 5);  // same values, by the original's input order
  ra.run();
  rb.run();
  for (NodeId id : a.outputs()) {
    const std::string& name = a.node(id).name;
    std::vector<float> x = ra.output_f32(name), y = rb.output_f32(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4 + 1e-4 * std::fabs(x[i])) << name << "[" << i << "]";
  }
}

}  // namespace

TEST(Dedup, FindsEveryCopyOfARepeatedBlock) {
  for (int blocks : {2, 3, 6}) {
    Graph g = mlp_stack(blocks);
    auto rb = find_repeated_blocks(g);
    ASSERT_TRUE(rb.has_value()) << blocks;
    EXPECT_EQ(rb->copies, static_cast<size_t>(blocks));
  }
}

TEST(Dedup, NoRepetitionNoBlocks) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr(4)});
  (exp(x) + sqrt(x)).output("y");
  EXPECT_FALSE(find_repeated_blocks(g).has_value());
}

TEST(Dedup, StitchedPlanMatchesTheReference) {
  Graph g = mlp_stack(4);
  CompileResult r = compile(g);
  EXPECT_EQ(r.block_copies, 4u);
  // One e-graph for one block: far smaller than the whole graph.
  EXPECT_LT(r.block_nodes * 3, r.graph_nodes);
  expect_same_outputs(g, r.plan, {{"b", 3}});
  CompileOptions no_dedup;
  no_dedup.dedup = false;
  CompileResult plain = compile(g, no_dedup);
  EXPECT_EQ(plain.block_copies, 0u);
  expect_same_outputs(g, plain.plan, {{"b", 2}});
}

TEST(Dedup, TinyLlamaWithKvCacheStitchesCorrectly) {
  Graph g;
  LlamaShape s = LlamaShape::tiny();
  s.layers = 3;
  build_llama(g, s);
  CompileResult r = compile(g);
  EXPECT_EQ(r.block_copies, 3u);
  expect_same_outputs(g, r.plan, {{"seq", 3}, {"past", 2}});
}
