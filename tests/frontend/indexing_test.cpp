// gather / scatter / index_select / embedding against naive torch-semantics loops.
#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;

// torch.gather: out[c] = x[c with c[axis] replaced by index[c]].
Ref gather_ref(const Ref& x, int axis, const Ref& index) {
  size_t a = ax(axis, x.rank());
  return make(index.shape, [&](const Idx& c) {
    Idx src = c;
    src[a] = static_cast<int64_t>(index.at(c));
    return x.at(src);
  });
}

// torch.Tensor.scatter: a copy of x; for each index coordinate j in row-major order,
// out[j with j[axis] = index[j]] = src[j] (so the last write wins).
Ref scatter_ref(const Ref& x, int axis, const Ref& index, const Ref& src) {
  size_t a = ax(axis, x.rank());
  Ref out = x;
  for (int64_t i = 0; i < index.numel(); ++i) {
    Idx j = unravel(i, index.shape), dst = j;
    dst[a] = static_cast<int64_t>(index.data[i]);
    out.at(dst) = src.at(j);
  }
  return out;
}

Buffer run_gather(const Ref& x, DType t, int axis, const Ref& index) {
  Case c;
  Tensor tx = c.in("x", x, t), ti = c.in("i", index, DType::I32);
  return c.run(lm::gather(tx, axis, ti));
}

TEST(IndexingGather, AlongEachAxis) {
  Ref x = ramp({3, 4});
  Ref i0({2, 4}, {2, 0, 1, 2, 0, 0, 2, 1});
  EXPECT_TRUE(same(gather_ref(x, 0, i0), run_gather(x, DType::F32, 0, i0), DType::F32));
  Ref i1({3, 2}, {3, 0, 1, 1, 0, 2});
  EXPECT_TRUE(same(gather_ref(x, 1, i1), run_gather(x, DType::F32, 1, i1)));
  EXPECT_TRUE(same(gather_ref(x, 1, i1), run_gather(x, DType::F32, -1, i1)));
  // Hand-checked: torch.gather([[1,2],[3,4]], 1, [[0,0],[1,0]]) = [[1,1],[4,3]].
  EXPECT_TRUE(same(Ref({2, 2}, {1, 1, 4, 3}),
                   run_gather(Ref({2, 2}, {1, 2, 3, 4}), DType::F32, 1, Ref({2, 2}, {0, 0, 1, 0}))));
}

TEST(IndexingGather, IndexSmallerThanXInEveryDim) {
  Ref x = ramp({4, 5, 3});
  Ref idx = make({2, 3, 2}, [](const Idx& c) { return static_cast<double>((c[0] * 3 + c[1] * 2 + c[2]) % 5); });
  EXPECT_TRUE(same(gather_ref(x, 1, idx), run_gather(x, DType::F32, 1, idx)));
  Ref idx0 = make({3, 1, 3}, [](const Idx& c) { return static_cast<double>((c[0] + 2 * c[2]) % 4); });
  EXPECT_TRUE(same(gather_ref(x, 0, idx0), run_gather(x, DType::F32, 0, idx0)));
  Ref idx2 = make({1, 4, 5}, [](const Idx& c) { return static_cast<double>((c[1] + c[2]) % 3); });
  EXPECT_TRUE(same(gather_ref(x, -1, idx2), run_gather(x, DType::F32, -1, idx2)));
}

TEST(IndexingGather, IntBoolAndViews) {
  Ref xi = make({3, 3}, [](const Idx& c) { return c[0] == 0 && c[1] == 0 ? -2147483648.0 : c[0] * 10.0 + c[1]; });
  Ref idx({2, 3}, {0, 2, 1, 1, 0, 0});
  EXPECT_TRUE(same(gather_ref(xi, 0, idx), run_gather(xi, DType::I32, 0, idx), DType::I32));
  Ref xb({2, 3}, {1, 0, 0, 0, 1, 1});
  Ref ib({2, 2}, {2, 0, 1, 2});
  EXPECT_TRUE(same(gather_ref(xb, 1, ib), run_gather(xb, DType::Bool, 1, ib), DType::Bool));
  // x read through a transposed view; the index itself a flipped view.
  Ref x = ramp({3, 4});
  Ref ii({3, 3}, {0, 1, 2, 3, 3, 0, 1, 1, 2});
  Case c;
  Tensor tx = c.in("x", x), ti = c.in("i", ii, DType::I32);
  Ref want = gather_ref(transpose(x, 0, 1), 0, flip(ii, {1}));
  EXPECT_TRUE(same(want, c.run(lm::gather(lm::transpose(tx, 0, 1), 0, lm::flip(ti, {1})))));
}

// The implementation documents that an out-of-range index reads 0 (instead of wrapping into a
// neighbouring row) and that scatter skips it.
TEST(IndexingGather, OutOfRangeIndexReadsZero) {
  Ref x({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(same(Ref({2, 2}, {0, 2, 4, 0}), run_gather(x, DType::F32, 1, Ref({2, 2}, {3, 1, 0, -1}))));
  Case c;
  Tensor tx = c.in("x", x), ti = c.in("i", Ref({1, 2}, {3, 1}), DType::I32), ts = c.in("s", Ref({1, 2}, {9, 8}));
  EXPECT_TRUE(same(Ref({2, 3}, {1, 8, 3, 4, 5, 6}), c.run(lm::scatter(tx, 1, ti, ts))));
}

Buffer run_scatter(const Ref& x, DType t, int axis, const Ref& index, const Ref& src) {
  Case c;
  Tensor tx = c.in("x", x, t), ti = c.in("i", index, DType::I32), ts = c.in("s", src, t);
  return c.run(lm::scatter(tx, axis, ti, ts));
}

TEST(IndexingScatter, TorchSemantics) {
  // Hand-checked torch example: zeros(3,5).scatter(0, [[0,1,2,0]], arange(1,11).reshape(2,5))
  // = [[1,0,0,4,0],[0,2,0,0,0],[0,0,3,0,0]].
  Ref z = make({3, 5}, [](const Idx&) { return 0.0; });
  Ref src = make({2, 5}, [](const Idx& c) { return 1.0 + c[0] * 5 + c[1]; });
  EXPECT_TRUE(same(Ref({3, 5}, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}),
                   run_scatter(z, DType::F32, 0, Ref({1, 4}, {0, 1, 2, 0}), src)));
  // Along the last axis, src larger than index in both dims.
  Ref x = ramp({3, 4});
  Ref idx({2, 2}, {3, 0, 1, 2});
  Ref s = ramp({3, 3}, 1.0, 13, 10.0);
  EXPECT_TRUE(same(scatter_ref(x, 1, idx, s), run_scatter(x, DType::F32, 1, idx, s)));
  EXPECT_TRUE(same(scatter_ref(x, 1, idx, s), run_scatter(x, DType::F32, -1, idx, s)));
  // i32, along axis 0.
  Ref xi = make({3, 2}, [](const Idx& c) { return -1.0 - c[0] * 2 - c[1]; });
  Ref ii({2, 2}, {2, 0, 0, 1});
  Ref si({2, 2}, {100, 200, 300, 2147483647});
  EXPECT_TRUE(same(scatter_ref(xi, 0, ii, si), run_scatter(xi, DType::I32, 0, ii, si), DType::I32));
}

TEST(IndexingScatter, LastWriteWins) {
  Ref x = make({2, 3}, [](const Idx&) { return 0.0; });
  Ref idx({2, 3}, {1, 1, 1, 0, 0, 2});  // row 0 writes column 1 three times
  Ref src({2, 3}, {1, 2, 3, 4, 5, 6});
  Ref want({2, 3}, {0, 3, 0, 5, 0, 6});  // hand-checked
  EXPECT_TRUE(same(want, run_scatter(x, DType::F32, 1, idx, src)));
  EXPECT_TRUE(same(scatter_ref(x, 1, idx, src), run_scatter(x, DType::F32, 1, idx, src)));
  // Along axis 0: both rows of index write x[0][*]; the second row's values stay.
  Ref idx0({2, 3}, {0, 0, 1, 0, 1, 1});
  Ref want0({2, 3}, {4, 2, 0, 0, 5, 6});
  EXPECT_TRUE(same(want0, run_scatter(x, DType::F32, 0, idx0, src)));
}

TEST(IndexingScatter, SrcDtypeCastToX) {
  Case c;
  Tensor tx = c.in("x", Ref({3}, {0, 0, 0}), DType::I32), ti = c.in("i", Ref({2}, {2, 0}), DType::I32);
  Tensor ts = c.in("s", Ref({2}, {1.75, -2.5}));
  EXPECT_TRUE(same(Ref({3}, {-2, 0, 1}), c.run(lm::scatter(tx, 0, ti, ts)), DType::I32));  // truncates
}

TEST(IndexingScatter, IntoViewsAndFromViews) {
  Ref x = ramp({3, 4});  // scattered into through its transpose [4, 3]
  Ref idx({2, 3}, {3, 0, 1, 2, 2, 0});
  Ref src = ramp({2, 4}, 1.0, 11, 20.0);
  Case c;
  Tensor tx = c.in("x", x), ti = c.in("i", idx, DType::I32), ts = c.in("s", src);
  Buffer got = c.run(lm::scatter(lm::transpose(tx, 0, 1), 0, lm::flip(ti, {0}), lm::pad(ts, {{0, 1}}, 9)));
  EXPECT_TRUE(same(scatter_ref(transpose(x, 0, 1), 0, flip(idx, {0}), pad(src, {{0, 1}}, 9)), got));
  // gather from a padded view reads the pad value
  Case c2;
  Tensor px = c2.in("x", x), pi = c2.in("i", Ref({3, 2}, {0, 5, 4, 1, 5, 0}), DType::I32);
  Buffer g = c2.run(lm::gather(lm::pad(px, {{0, 0}, {1, 1}}, -7), 1, pi));
  EXPECT_TRUE(same(gather_ref(pad(x, {{0, 0}, {1, 1}}, -7), 1, Ref({3, 2}, {0, 5, 4, 1, 5, 0})), g));
}

TEST(IndexingIndexSelect, AxesAndRepeats) {
  Ref x = ramp({4, 3});
  Ref idx({5}, {3, 0, 0, 2, 1});
  auto want = [&](int axis) {
    size_t a = ax(axis, 2);
    Idx s = x.shape;
    s[a] = 5;
    return make(s, [&](const Idx& c) {
      Idx src = c;
      src[a] = static_cast<int64_t>(idx.data[c[a]]);
      return x.at(src);
    });
  };
  for (int axis : {0, -2}) {
    Case c;
    Tensor tx = c.in("x", x), ti = c.in("i", idx, DType::I32);
    EXPECT_TRUE(same(want(axis), c.run(lm::index_select(tx, axis, ti)))) << axis;
  }
  Ref idx1({2}, {2, 0});
  Ref xi = make({4, 3}, [](const Idx& q) { return q[0] * 10.0 - q[1]; });
  Case c;
  Tensor tx = c.in("x", xi, DType::I32), ti = c.in("i", idx1, DType::I32);
  Ref w = make({4, 2}, [&](const Idx& q) { return xi.at({q[0], static_cast<int64_t>(idx1.data[q[1]])}); });
  EXPECT_TRUE(same(w, c.run(lm::index_select(tx, 1, ti)), DType::I32));
}

TEST(IndexingEmbedding, IdsTwoByThree) {
  Ref w = ramp({5, 4}, 0.25, 17, -1.0);
  Ref ids({2, 3}, {4, 0, 2, 2, 3, 4});
  Ref want = make({2, 3, 4}, [&](const Idx& c) { return w.at({static_cast<int64_t>(ids.at({c[0], c[1]})), c[2]}); });
  Case c;
  Tensor tw = c.in("w", w), ti = c.in("ids", ids, DType::I32);
  Tensor e = lm::embedding(tw, ti);
  EXPECT_EQ(lm::to_string(e.shape()), "[2, 3, 4]");
  EXPECT_TRUE(same(want, c.run(e)));
}

TEST(IndexingEmbedding, SymbolicSequence) {
  Expr s = Expr::var("s");
  Ref w = ramp({5, 2});
  Case c;
  Tensor tw = c.in("w", w);
  Tensor ti = c.in("ids", Ref({1}, {0}), DType::I32, {s});
  lm::embedding(tw, ti).output("out");
  for (int64_t n : {1, 4}) {
    Ref ids = make({n}, [](const Idx& q) { return static_cast<double>((q[0] * 3 + 1) % 5); });
    c.set("ids", ids, DType::I32);
    Interpreter rt = c.run_all();
    Ref want = make({n, 2}, [&](const Idx& q) { return w.at({static_cast<int64_t>(ids.data[q[0]]), q[1]}); });
    EXPECT_TRUE(same(want, rt.output("out"))) << "s=" << n;
  }
}

TEST(IndexingErrors, RankAndDtype) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {3, 4});
  Tensor i1 = lm::input(g, "i1", DType::I32, {4});
  Tensor i2 = lm::input(g, "i2", DType::I32, {2, 2});
  Tensor fi = lm::input(g, "fi", DType::F32, {2, 2});
  Tensor fv = lm::input(g, "fv", DType::F32, {2});
  EXPECT_TRUE(throws_error([&] { lm::gather(x, 0, i1); }, {"gather", "[4]", "[3, 4]", "rank"}));
  EXPECT_TRUE(throws_error([&] { lm::gather(x, 0, fi); }, {"gather", "integer", "f32"}));
  EXPECT_TRUE(throws_error([&] { lm::gather(x, 2, i2); }, {"gather", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::scatter(x, 0, fi, fi); }, {"scatter", "integer"}));
  EXPECT_TRUE(throws_error([&] { lm::scatter(x, 0, i1, fv); }, {"scatter"}));
  EXPECT_TRUE(throws_error([&] { lm::scatter(x, 0, i2, fv); }, {"scatter", "[2]", "[2, 2]"}));
  EXPECT_TRUE(throws_error([&] { lm::index_select(x, 0, fv); }, {"index_select", "integer"}));
  EXPECT_TRUE(throws_error([&] { lm::index_select(x, 0, i2); }, {"index_select", "1-D"}));
  EXPECT_TRUE(throws_error([&] { lm::embedding(x, fi); }, {"integer"}));
  EXPECT_TRUE(throws_error([&] { lm::embedding(i1, i2); }, {"embedding", "[vocab, dim]"}));
}

}  // namespace
