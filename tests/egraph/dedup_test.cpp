// Layer dedup: repeated blocks are found by structure, compiled once, and the stitched plan
// computes what the original graph computes.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compile.h"
#include "compiler/dedup.h"
#include "models/llama_graph.h"
#include "plan_check.h"

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

}  // namespace

TEST(Dedup, FindsEveryCopyOfARepeatedBlock) {
  for (int blocks : {2, 3, 6}) {
    Graph g = mlp_stack(blocks);
    auto rb = find_repeated_blocks(g);
    ASSERT_TRUE(rb.has_value()) << blocks;
    EXPECT_EQ(rb->copies, static_cast<size_t>(blocks));
  }
}

// The search's candidate limit covers the whole compile: the block and the graph around it
// share it.
TEST(Dedup, SearchLimitIsSharedByTheBlockAndTheOuterGraph) {
  Graph g = mlp_stack(4);
  CompileOptions opts;
  opts.search.limit = 12;
  opts.search.profile_dims = {{"b", 3}};
  int calls = 0;
  opts.profiler = [&](const Graph& plan, const SearchOptions& s) {
    ++calls;
    return profile_on_interpreter(plan, s);
  };
  CompileResult r = compile(g, opts);
  ASSERT_EQ(r.block_copies, 4u);
  EXPECT_LE(calls, 12);
  EXPECT_LE(r.search.profiled, 8);
  EXPECT_LE(r.outer_search.profiled, 4);
  EXPECT_GT(r.search.profiled, 1);
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
  plancheck::expect_same_outputs(g, r.plan, {{"b", 3}}, 1e-4, 0.5f);
  CompileOptions no_dedup;
  no_dedup.dedup = false;
  CompileResult plain = compile(g, no_dedup);
  EXPECT_EQ(plain.block_copies, 0u);
  plancheck::expect_same_outputs(g, plain.plan, {{"b", 2}}, 1e-4, 0.5f);
}

TEST(Dedup, TinyLlamaWithKvCacheStitchesCorrectly) {
  Graph g;
  LlamaShape s = LlamaShape::tiny();
  s.layers = 3;
  build_llama(g, s);
  CompileResult r = compile(g);
  EXPECT_EQ(r.block_copies, 3u);
  plancheck::expect_same_outputs(g, r.plan, {{"seq", 3}, {"past", 2}}, 1e-4, 0.5f);
}
