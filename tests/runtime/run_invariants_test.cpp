// Values kept from run to run: computed once from weights and constants, recomputed when an
// input they read is set again or written in place, never kept when a dynamic dim is involved.
// A kernel hook counts how often each op really runs.
#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

struct Counted {
  Interpreter it;
  std::map<OpKind, int> runs;
  explicit Counted(Graph g) : it(std::move(g)) {
    it.set_kernel_hook([this](const luminal::Node& n, const std::vector<luminal::Reader>&, const std::vector<std::vector<int64_t>>&,
                              Buffer&) {
      ++runs[n.op];
      return false;  // the reference computes it
    });
  }
};

// y = x * cast(w, f32) * (w_scale + 1): the cast and the scale read only weights.
Graph scaled() {
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({4}));
  NodeId w = g.input("w", DType::BF16, exprs({4}));
  NodeId ws = g.input("w_scale", DType::F32, exprs({4}));
  NodeId wf = g.cast(edge(g, w), DType::F32);
  NodeId one = g.constant(1.0f);
  NodeId sc = g.binary(OpKind::Add, edge(g, ws), edge(one, View().unsqueeze(0).expand(0, Expr(4))));
  NodeId xw = g.binary(OpKind::Mul, edge(g, x), edge(g, wf));
  g.output("y", edge(g, g.binary(OpKind::Mul, edge(g, xw), edge(g, sc))));
  return g;
}

TEST(RunInvariants, WeightOnlyValuesRunOnceUntilAWeightIsSetAgain) {
  Counted c(scaled());
  c.it.set_input("w", Buffer::f32({1, 2, 3, 4}, {4}));
  c.it.set_input("w_scale", Buffer::f32({0, 1, 0, 1}, {4}));
  c.it.set_input("x", Buffer::f32({1, 1, 1, 1}, {4}));
  c.it.run();
  EXPECT_EQ(c.runs[OpKind::Cast], 1);
  EXPECT_EQ(c.runs[OpKind::Add], 1);
  EXPECT_EQ(c.runs[OpKind::Mul], 2);
  EXPECT_EQ(c.it.output_f32("y"), (std::vector<float>{1, 4, 3, 8}));

  c.it.set_input("x", Buffer::f32({2, 2, 2, 2}, {4}));  // a new activation: only the muls run
  c.it.run();
  EXPECT_EQ(c.runs[OpKind::Cast], 1);
  EXPECT_EQ(c.runs[OpKind::Add], 1);
  EXPECT_EQ(c.runs[OpKind::Mul], 4);
  EXPECT_EQ(c.it.output_f32("y"), (std::vector<float>{2, 8, 6, 16}));

  c.it.set_input("w", Buffer::f32({4, 3, 2, 1}, {4}));  // the cast runs again, the scale does not
  c.it.run();
  EXPECT_EQ(c.runs[OpKind::Cast], 2);
  EXPECT_EQ(c.runs[OpKind::Add], 1);
  EXPECT_EQ(c.it.output_f32("y"), (std::vector<float>{8, 12, 4, 4}));
}

TEST(RunInvariants, AnythingReadingADynamicDimRunsEveryTime) {
  // cast(w)[0..s) * x[s]: the slice's bound is a dynamic dim, so the product is never kept.
  Graph g;
  Expr s = Expr::var("s");
  NodeId x = g.input("x", DType::F32, {s});
  NodeId w = g.input("w", DType::BF16, exprs({8}));
  NodeId wf = g.cast(edge(g, w), DType::F32);
  NodeId m = g.binary(OpKind::Mul, edge(g, x), edge(wf, View::contiguous(exprs({8})).slice(0, Expr(0), s)));
  g.output("y", edge(g, m));
  Counted c(std::move(g));
  c.it.set_input("w", Buffer::f32({1, 2, 3, 4, 5, 6, 7, 8}, {8}));
  c.it.set_input("x", Buffer::f32({1, 1, 1}, {3}));
  c.it.run();
  c.it.set_input("x", Buffer::f32({1, 1, 1, 1, 1}, {5}));
  c.it.run();
  EXPECT_EQ(c.runs[OpKind::Cast], 1);  // the cast itself reads no dim
  EXPECT_EQ(c.runs[OpKind::Mul], 2);
  EXPECT_EQ(c.it.output_f32("y"), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(RunInvariants, AnInputWrittenInPlaceIsReadAfresh) {
  // cache = scatter(cache, idx, v) in place; total = cache + 1 reads the cache after the write,
  // and before = cache * 2 reads it directly: neither may reuse an old value.
  Graph g;
  NodeId cache = g.input("cache", DType::F32, exprs({4}));
  NodeId idx = g.input("idx", DType::I32, exprs({1}));
  NodeId v = g.input("v", DType::F32, exprs({1}));
  NodeId two = g.constant(2.0f);
  NodeId before = g.binary(OpKind::Mul, edge(g, cache), edge(two, View().unsqueeze(0).expand(0, Expr(4))));
  g.output("before", edge(g, before));
  NodeId written = g.scatter(edge(g, cache), edge(g, idx), edge(g, v));
  g.output("after", edge(g, written));
  Counted c(std::move(g));
  c.it.set_input("cache", Buffer::f32({0, 0, 0, 0}, {4}));
  for (int step = 0; step < 3; ++step) {
    c.it.set_input("idx", Buffer::i32({step}, {1}));
    c.it.set_input("v", Buffer::f32({static_cast<float>(step + 1)}, {1}));
    c.it.run();
  }
  // Before the third write the cache held 1, 2 at positions 0, 1.
  EXPECT_EQ(c.it.output_f32("before"), (std::vector<float>{2, 4, 0, 0}));
  EXPECT_EQ(c.it.output_f32("after"), (std::vector<float>{1, 2, 3, 0}));
}

}  // namespace
