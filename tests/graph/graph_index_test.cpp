// Gather and Scatter: flat indices, out-of-range handling, duplicates, views on the data.
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

TEST(GraphGather, ReadsFlatIndicesAndZeroOutOfRange) {
  Graph g;
  NodeId data = g.input("data", DType::F32, exprs({2, 3}));
  NodeId idx = g.input("idx", DType::I32, exprs({2, 3}));
  NodeId r = g.gather(edge(g, idx), edge(g, data));
  EXPECT_EQ(g.node(r).dtype, DType::F32);
  g.output("out", edge(g, r));
  std::vector<float> d{10, 11, 12, 13, 14, 15};
  std::vector<int32_t> ix{0, 5, 6, -1, 3, 3};
  Interpreter it = run(std::move(g), {{"data", Buffer::f32(d, {2, 3})}, {"idx", Buffer::i32(ix, {2, 3})}});
  EXPECT_EQ(it.output("out").shape(), (Shape{2, 3}));
  std::vector<float> want;
  for (int32_t k : ix) want.push_back(k >= 0 && k < 6 ? d[k] : 0.0f);
  EXPECT_FLOATS_SAME(it.output_as<float>("out"), want);
}

TEST(GraphGather, IndexIsIntoTheDataView) {
  // data [2, 3] read transposed as [3, 2]: logical flat index k is element (k / 2, k % 2) of the
  // transpose, i.e. data[k % 2][k / 2].
  Graph g;
  NodeId data = g.input("data", DType::I32, exprs({2, 3}));
  NodeId idx = g.input("idx", DType::I32, exprs({7}));
  NodeId r = g.gather(edge(g, idx), edge(data, contiguous({2, 3}).permute({1, 0})));
  g.output("out", edge(g, r));
  std::vector<int32_t> d{0, 1, 2, 10, 11, 12};
  std::vector<int32_t> ix{0, 1, 2, 3, 4, 5, 100};
  Interpreter it = run(std::move(g), {{"data", Buffer::i32(d, {2, 3})}, {"idx", Buffer::i32(ix, {7})}});
  std::vector<int32_t> want;
  for (int32_t k : ix) want.push_back(k < 6 ? d[(k % 2) * 3 + k / 2] : 0);
  EXPECT_EQ(it.output_as<int32_t>("out"), want);
}

TEST(GraphGather, EmbeddingLookupWithBroadcastIndices) {
  // Rows of a [4, 3] table picked by token ids: idx[t, j] = ids[t] * 3 + j, built from an
  // i32 multiply-add with broadcast views.
  Graph g;
  NodeId table = g.input("table", DType::F32, exprs({4, 3}));
  NodeId ids = g.input("ids", DType::I32, exprs({5}));
  NodeId three = g.constant(3);
  NodeId cols = g.iota(Expr::index(), 3);
  NodeId rows = g.binary(OpKind::Mul, edge(ids, contiguous({5}).unsqueeze(1).expand(1, 3)),
                         edge(three, View().broadcast_to(exprs({5, 3}))));
  NodeId idx = g.binary(OpKind::Add, edge(g, rows), edge(cols, contiguous({3}).broadcast_to(exprs({5, 3}))));
  g.output("out", edge(g, g.gather(edge(g, idx), edge(g, table))));
  std::vector<float> t = random_floats(12, -1, 1, 5);
  std::vector<int32_t> tok{3, 0, 0, 2, 1};
  Interpreter it = run(std::move(g), {{"table", Buffer::f32(t, {4, 3})}, {"ids", Buffer::i32(tok, {5})}});
  std::vector<float> want;
  for (int32_t id : tok)
    for (int j = 0; j < 3; ++j) want.push_back(t[id * 3 + j]);
  EXPECT_FLOATS_SAME(it.output_as<float>("out"), want);
}

TEST(GraphGather, NonI32IndicesAreRejected) {
  Graph g;
  NodeId data = g.input("data", DType::F32, exprs({4}));
  NodeId fidx = g.input("fidx", DType::F32, exprs({2}));
  NodeId bidx = g.input("bidx", DType::Bool, exprs({2}));
  EXPECT_LM_ERROR(g.gather(edge(g, fidx), edge(g, data)), "Gather", "i32", "f32");
  EXPECT_LM_ERROR(g.gather(edge(g, bidx), edge(g, data)), "Gather", "bool");
  EXPECT_LM_ERROR(g.scatter(edge(g, data), edge(g, fidx), edge(g, fidx)), "Scatter", "f32");
}

TEST(GraphScatter, WritesSkipsOutOfRangeAndLastWriteWins) {
  Graph g;
  NodeId dest = g.input("dest", DType::F32, exprs({2, 3}));
  NodeId idx = g.input("idx", DType::I32, exprs({6}));
  NodeId src = g.input("src", DType::F32, exprs({6}));
  NodeId r = g.scatter(edge(g, dest), edge(g, idx), edge(g, src));
  EXPECT_EQ(g.node(r).dtype, DType::F32);
  g.output("out", edge(g, r));
  std::vector<float> d{0, 1, 2, 3, 4, 5}, s{10, 20, 30, 40, 50, 60};
  std::vector<int32_t> ix{1, 7, 1, -2, 5, 6};
  Interpreter it = run(std::move(g), {{"dest", Buffer::f32(d, {2, 3})}, {"idx", Buffer::i32(ix, {6})}, {"src", Buffer::f32(s, {6})}});
  EXPECT_EQ(it.output("out").shape(), (Shape{2, 3}));
  std::vector<float> want = d;
  for (size_t j = 0; j < ix.size(); ++j)
    if (ix[j] >= 0 && ix[j] < 6) want[ix[j]] = s[j];
  EXPECT_FLOATS_SAME(it.output_as<float>("out"), want);
  EXPECT_EQ(want, (std::vector<float>{0, 30, 2, 3, 4, 50}));
}

TEST(GraphScatter, RandomAgainstNaiveLoop) {
  Graph g;
  NodeId dest = g.input("dest", DType::I32, exprs({40}));
  NodeId idx = g.input("idx", DType::I32, exprs({4, 25}));
  NodeId src = g.input("src", DType::I32, exprs({4, 25}));
  g.output("out", edge(g, g.scatter(edge(g, dest), edge(g, idx), edge(g, src))));
  std::vector<int32_t> d = random_ints(40, -9, 9, 1), ix = random_ints(100, -5, 45, 2), s = random_ints(100, 100, 999, 3);
  Interpreter it = run(std::move(g), {{"dest", Buffer::i32(d, {40})}, {"idx", Buffer::i32(ix, {4, 25})}, {"src", Buffer::i32(s, {4, 25})}});
  std::vector<int32_t> want = d;
  for (size_t j = 0; j < ix.size(); ++j)
    if (ix[j] >= 0 && ix[j] < 40) want[ix[j]] = s[j];
  EXPECT_EQ(it.output_as<int32_t>("out"), want);
}

// The in-place KV write copies runs of consecutive slots at once: runs that count up by one,
// runs with a gap, runs that reach past the end (element by element, the tail skipped), a
// transposed source (not a run), and indices shaped unlike the source (runs of their common
// row length). Each against the naive loop.
TEST(GraphScatter, RunsOfConsecutiveSlotsAgainstNaiveLoop) {
  std::vector<int32_t> ix;
  for (int t = 0; t < 8; ++t) ix.push_back(8 + t);          // a run
  for (int t = 0; t < 8; ++t) ix.push_back(t == 5 ? 40 : 20 + t);  // a gap
  for (int t = 0; t < 8; ++t) ix.push_back(60 + t);         // past the end of 64 slots
  for (bool transposed : {false, true})
    for (bool flat_idx : {false, true}) {
      Graph g;
      NodeId dest = g.input("dest", DType::I32, exprs({64}));
      NodeId idx = g.input("idx", DType::I32, flat_idx ? exprs({24}) : exprs({3, 8}));
      NodeId src = g.input("src", DType::I32, transposed ? exprs({8, 3}) : exprs({3, 8}));
      Edge ie = flat_idx ? Edge{idx, View::contiguous({Expr(24)}).reshape({Expr(3), Expr(8)})} : edge(g, idx);
      Edge se = transposed ? Edge{src, View::contiguous({Expr(8), Expr(3)}).permute({1, 0})} : edge(g, src);
      g.output("out", edge(g, g.scatter(edge(g, dest), ie, se)));
      std::vector<int32_t> d = random_ints(64, -9, 9, 4), sv = random_ints(24, 100, 999, 5);
      Interpreter it = run(std::move(g), {{"dest", Buffer::i32(d, {64})},
                                          {"idx", Buffer::i32(ix, flat_idx ? Shape{24} : Shape{3, 8})},
                                          {"src", Buffer::i32(sv, transposed ? Shape{8, 3} : Shape{3, 8})}});
      std::vector<int32_t> want = d;
      for (int j = 0; j < 24; ++j) {
        const int row = j / 8, col = j % 8;
        const int32_t v = transposed ? sv[col * 3 + row] : sv[j];
        if (ix[j] >= 0 && ix[j] < 64) want[ix[j]] = v;
      }
      EXPECT_EQ(it.output_as<int32_t>("out"), want) << "transposed " << transposed << " flat idx " << flat_idx;
    }
}

TEST(GraphScatter, BuilderChecks) {
  Graph g;
  NodeId dest = g.input("dest", DType::F32, exprs({4}));
  NodeId idx = g.input("idx", DType::I32, exprs({2}));
  NodeId isrc = g.input("isrc", DType::I32, exprs({2}));
  NodeId src3 = g.input("src3", DType::F32, exprs({3}));
  EXPECT_LM_ERROR(g.scatter(edge(g, dest), edge(g, idx), edge(g, isrc)), "Scatter", "f32", "i32");
  EXPECT_LM_ERROR(g.scatter(edge(g, dest), edge(g, idx), edge(g, src3)), "Scatter", "[2]", "[3]");
}
