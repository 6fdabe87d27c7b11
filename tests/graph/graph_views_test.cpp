// Edges with non-contiguous views: permuted, broadcast, sliced, padded, flipped, reshaped.
// Each expected value is indexed by hand from the row-major input.
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

// Output "out" reads input x (f32, `shape`, values 0, 1, 2, ...) through `view`.
Buffer read_through(const Shape& shape, const View& view, DType t = DType::F32) {
  Graph g;
  NodeId x = g.input("x", t, exprs(shape));
  NodeId out = g.output("out", edge(x, view));
  EXPECT_EQ(g.node(out).shape, view.shape());
  return run(std::move(g), {{"x", Buffer::f32(arange_f(numel(shape)), shape)}}).output("out");
}

}  // namespace

TEST(GraphViews, Permuted) {
  Buffer r = read_through({2, 3, 4}, contiguous({2, 3, 4}).permute({2, 0, 1}));
  ASSERT_EQ(r.shape(), (Shape{4, 2, 3}));
  std::vector<float> want;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) want.push_back(static_cast<float>(b * 12 + c * 4 + a));  // x[b][c][a]
  EXPECT_FLOATS_SAME(r.to_f32(), want);
}

TEST(GraphViews, Broadcast) {
  Buffer r = read_through({3}, contiguous({3}).broadcast_to(exprs({2, 3})));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{0, 1, 2, 0, 1, 2}));
  r = read_through({2, 1, 3}, contiguous({2, 1, 3}).expand(1, 4));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(static_cast<float>(i * 3 + k));
  EXPECT_FLOATS_SAME(r.to_f32(), want);
}

TEST(GraphViews, Sliced) {
  // x [4, 5]: rows 0 and 2 (step 2), columns 1..3.
  Buffer r = read_through({4, 5}, contiguous({4, 5}).slice(0, 0, 4, 2).slice(1, 1, 4));
  ASSERT_EQ(r.shape(), (Shape{2, 3}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(static_cast<float>(2 * i * 5 + 1 + j));
  EXPECT_FLOATS_SAME(r.to_f32(), want);
}

TEST(GraphViews, PaddedReadsThePadValue) {
  // x [2, 3] padded on axis 1 by 1 before and 2 after with -7.5.
  Buffer r = read_through({2, 3}, contiguous({2, 3}).pad(1, 1, 2, -7.5f));
  ASSERT_EQ(r.shape(), (Shape{2, 6}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) want.push_back(j >= 1 && j < 4 ? static_cast<float>(i * 3 + j - 1) : -7.5f);
  EXPECT_FLOATS_SAME(r.to_f32(), want);
  // Padding on both axes, with -inf.
  r = read_through({2, 2}, contiguous({2, 2}).pad(0, 1, 0, -INFINITY).pad(1, 0, 1, -INFINITY));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{-INFINITY, -INFINITY, -INFINITY, 0, 1, -INFINITY, 2, 3, -INFINITY}));
}

TEST(GraphViews, PadValueTakesTheSourceDtype) {
  // On an i32 input the pad value 3.7 reads as trunc(3.7) = 3; on bf16, 0.1 reads as bf16(0.1).
  Buffer r = read_through({2}, contiguous({2}).pad(0, 1, 1, 3.7f), DType::I32);
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{3, 0, 1, 3}));
  r = read_through({2}, contiguous({2}).pad(0, 0, 1, 0.1f), DType::BF16);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{0, 1, luminal::round_to(DType::BF16, 0.1f)}));
}

TEST(GraphViews, SliceIntoPadding) {
  // pad [0 1 2] to [p 0 1 2 p p], then keep [1, 5): 0 1 2 p.
  Buffer r = read_through({3}, contiguous({3}).pad(0, 1, 2, 9).slice(0, 1, 5));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{0, 1, 2, 9}));
}

TEST(GraphViews, FlippedAndReshaped) {
  Buffer r = read_through({2, 3}, contiguous({2, 3}).flip(1));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  // Transpose [2, 3] -> [3, 2], then reshape to [6]: the transpose's row-major order.
  r = read_through({2, 3}, contiguous({2, 3}).permute({1, 0}).reshape(exprs({6})));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Slice then merge dims: needs a second view layer.
  View v = contiguous({3, 4}).slice(1, 1, 3).reshape(exprs({6}));
  r = read_through({3, 4}, v);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(GraphViews, PaddedThenReshaped) {
  // [2, 3] padded to [2, 4] with 9, then flattened: the mask lives below a reshape.
  Buffer r = read_through({2, 3}, contiguous({2, 3}).pad(1, 0, 1, 9).reshape(exprs({8})));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{0, 1, 2, 9, 3, 4, 5, 9}));
  // ... and sliced again on top: elements 3..6.
  r = read_through({2, 3}, contiguous({2, 3}).pad(1, 0, 1, 9).reshape(exprs({8})).slice(0, 3, 7));
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{9, 3, 4, 5}));
}

TEST(GraphViews, ViewsFeedComputeOps) {
  // out = x^T + y, with y broadcast from [3] to [3, 2], then summed over the padded axis.
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({2, 3}));
  NodeId y = g.input("y", DType::F32, exprs({3}));
  NodeId add = g.binary(OpKind::Add, edge(x, contiguous({2, 3}).permute({1, 0})),
                        edge(y, contiguous({3}).unsqueeze(1).expand(1, 2)));
  NodeId sum = g.reduce(OpKind::SumReduce, edge(add, contiguous({3, 2}).pad(1, 1, 1, 100)), 1);
  g.output("add", edge(g, add));
  g.output("sum", edge(g, sum));
  std::vector<float> xs = random_floats(6, -1, 1, 1), ys = random_floats(3, -1, 1, 2);
  Interpreter it = run(std::move(g), {{"x", Buffer::f32(xs, {2, 3})}, {"y", Buffer::f32(ys, {3})}});
  std::vector<float> want_add, want_sum;
  for (int i = 0; i < 3; ++i) {
    float acc = 100;
    for (int j = 0; j < 2; ++j) {
      want_add.push_back(xs[j * 3 + i] + ys[i]);
      acc += want_add.back();
    }
    want_sum.push_back(acc + 100);
  }
  EXPECT_FLOATS_SAME(it.output_as<float>("add"), want_add);
  EXPECT_FLOATS_SAME(it.output_as<float>("sum"), want_sum);
}
