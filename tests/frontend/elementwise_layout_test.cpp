// Elementwise ops on non-contiguous views (transposed, sliced, broadcast), on dynamic dims, and
// the errors the frontend raises for bad operands.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

const DType F32 = DType::F32, I32 = DType::I32, BOOL = DType::Bool;

std::vector<float> iota_f(int n, float scale = 1, float shift = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = i * scale + shift;
  return v;
}

// ---- non-contiguous inputs --------------------------------------------------------------------

TEST(ElementwiseLayout, TransposedInput) {
  // x is [3,2]; x^T is [2,3] with xt[i][j] = x[j][i].
  Graph g;
  Tensor x = input(g, "x", F32, {3, 2});
  Tensor y = input(g, "y", F32, {2, 3});
  Tensor xt = x.transpose(0, 1);
  Tensor out = stack({xt + y, exp(xt), maximum(xt, y)}, 0);
  std::vector<float> xv = {0, 1, 2, 3, 4, 5}, yv = {10, 20, 30, -1, -2, 9};
  Out o = run_graph(g, out, {{"x", Buffer::f32(xv, {3, 2})}, {"y", Buffer::f32(yv, {2, 3})}});
  EXPECT_EQ(o.shape, (std::vector<int64_t>{3, 2, 3}));
  std::vector<double> sum, ex, mx;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double xt_ij = xv[j * 2 + i], y_ij = yv[i * 3 + j];
      sum.push_back(xt_ij + y_ij);
      ex.push_back(round_to_dtype(std::exp(xt_ij), F32));
      mx.push_back(std::max(xt_ij, y_ij));
    }
  std::vector<double> got_sum(o.v.begin(), o.v.begin() + 6), got_ex(o.v.begin() + 6, o.v.begin() + 12),
      got_mx(o.v.begin() + 12, o.v.end());
  expect_values(got_sum, sum, exact(), {}, "xt + y");
  expect_values(got_ex, ex, ulps(10), {}, "exp(xt)");
  expect_values(got_mx, mx, exact(), {}, "maximum(xt, y)");
}

TEST(ElementwiseLayout, BothOperandsTransposed) {
  Graph g;
  Tensor a = input(g, "a", I32, {2, 3});
  Tensor b = input(g, "b", I32, {2, 3});
  Tensor out = a.transpose(0, 1) * b.transpose(-1, -2) - a.transpose(0, 1);  // [3,2]
  Out o = run_graph(g, out, {{"a", Buffer::i32({1, 2, 3, 4, 5, 6}, {2, 3})}, {"b", Buffer::i32({1, 0, -1, 2, 3, 4}, {2, 3})}});
  EXPECT_EQ(o.shape, (std::vector<int64_t>{3, 2}));
  // out[i][j] = a[j][i] * b[j][i] - a[j][i]
  expect_exact(o, {0, 4, -2, 10, -6, 18});
}

TEST(ElementwiseLayout, SlicedInputs) {
  // x [4,5] = 0..19. x[:, 1:4] is [4,3]; x[0:4:2, :] is [2,5]; x[1:, ::2] is [3,3].
  Graph g;
  Tensor x = input(g, "x", F32, {4, 5});
  Tensor cols = x.slice(1, 1, 4);
  Tensor bias = input(g, "bias", F32, {3});
  Out c = run_graph(g, cols * 2.0 + bias, {{"x", Buffer::f32(iota_f(20), {4, 5})}, {"bias", Buffer::f32({100, 200, 300}, {3})}});
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 1; j < 4; ++j) want.push_back((i * 5 + j) * 2 + 100 * j);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{4, 3}));
  expect_exact(c, want, "x[:, 1:4] * 2 + bias");

  Graph g2;
  Tensor x2 = input(g2, "x", F32, {4, 5});
  Tensor r = neg(x2.slice(0, 0, 4, 2));
  Out o2 = run_graph(g2, r, {{"x", Buffer::f32(iota_f(20), {4, 5})}});
  want.clear();
  for (int i = 0; i < 4; i += 2)
    for (int j = 0; j < 5; ++j) want.push_back(-(i * 5 + j));
  EXPECT_EQ(o2.shape, (std::vector<int64_t>{2, 5}));
  expect_exact(o2, want, "-x[0:4:2]");

  Graph g3;
  Tensor x3 = input(g3, "x", F32, {4, 5});
  Tensor s = x3.slice(0, 1, 4).slice(1, 0, 5, 2);
  Out o3 = run_graph(g3, where(gt(s, scalar_like(s, 10.0)), s, sqrt(s)), {{"x", Buffer::f32(iota_f(20), {4, 5})}});
  want.clear();
  for (int i = 1; i < 4; ++i)
    for (int j = 0; j < 5; j += 2) {
      double v = i * 5 + j;
      want.push_back(v > 10 ? v : round_to_dtype(std::sqrt(v), F32));
    }
  EXPECT_EQ(o3.shape, (std::vector<int64_t>{3, 3}));
  expect_exact(o3, want, "where on x[1:, ::2]");
}

TEST(ElementwiseLayout, SlicedAndTransposedTogether) {
  // (x[:, 1:3])^T + y, x [3,4] -> slice [3,2] -> transpose [2,3].
  Graph g;
  Tensor x = input(g, "x", F32, {3, 4});
  Tensor y = input(g, "y", F32, {2, 3});
  Tensor v = x.slice(1, 1, 3).transpose(0, 1);
  Out o = run_graph(g, v - y, {{"x", Buffer::f32(iota_f(12), {3, 4})}, {"y", Buffer::f32({1, 1, 1, 2, 2, 2}, {2, 3})}});
  expect_exact(o, {1 - 1, 5 - 1, 9 - 1, 2 - 2, 6 - 2, 10 - 2});
}

// ---- dynamic dims -----------------------------------------------------------------------------

TEST(ElementwiseDynamic, OneGraphManySizes) {
  Graph g;
  Expr n = Expr::var("n");
  Tensor x = input(g, "x", F32, {n});
  Tensor b = input(g, "b", F32, {1});
  Tensor y = where(gt(x, scalar_like(x, 0.0)), x * 2.0, exp(x)) + b;
  y.output("y");
  Interpreter rt(g);
  rt.set_input("b", Buffer::f32({0.5}, {1}));
  for (int64_t len : {1, 4, 7}) {
    std::vector<float> xs = iota_f(static_cast<int>(len), 1.5f, -3.0f);
    rt.set_input("x", Buffer::f32(xs, {len}));
    rt.run();
    Out o = collect(rt.output("y"));
    EXPECT_EQ(o.shape, std::vector<int64_t>{len});
    std::vector<double> want;
    for (float v : xs) want.push_back(round_to_dtype((v > 0 ? v * 2.0 : round_to_dtype(std::exp(v), F32)) + 0.5, F32));
    expect_values(o.v, want, ulps(8), {}, "n = " + std::to_string(len));
  }
}

TEST(ElementwiseDynamic, DynamicRowsBroadcastAgainstStaticRow) {
  Graph g;
  Expr n = Expr::var("n");
  Tensor x = input(g, "x", I32, {n, 3});
  Tensor r = input(g, "r", I32, {3});
  Tensor y = mod(x, r) + floor_divide(x, scalar_like(x, 2.0));
  y.output("y");
  Interpreter rt(g);
  rt.set_input("r", Buffer::i32({2, 3, -4}, {3}));
  for (int64_t len : {1, 4, 7}) {
    std::vector<int32_t> xs(len * 3);
    for (int64_t i = 0; i < len * 3; ++i) xs[i] = static_cast<int32_t>(i * 5 - 17);
    rt.set_input("x", Buffer::i32(xs, {len, 3}));
    rt.run();
    Out o = collect(rt.output("y"));
    EXPECT_EQ(o.shape, (std::vector<int64_t>{len, 3}));
    std::vector<double> want;
    const int rv[3] = {2, 3, -4};
    for (int64_t i = 0; i < len * 3; ++i) {
      int a = xs[i], d = rv[i % 3];
      int m = a % d;
      if (m != 0 && ((m < 0) != (d < 0))) m += d;
      int f = a >= 0 ? a / 2 : -((-a + 1) / 2);  // floor(a / 2)
      want.push_back(m + f);
    }
    expect_exact(o, want, "n = " + std::to_string(len));
  }
}

// ---- errors -----------------------------------------------------------------------------------

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-luminal exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

TEST(ElementwiseErrors, BroadcastMismatchNamesBothShapes) {
  Graph g;
  Tensor a = input(g, "a", F32, {2, 3});
  Tensor b = input(g, "b", F32, {4});
  std::string msg = error_of([&] { add(a, b); });
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { where(lt(a, a), a, b); }).find("[4]"), std::string::npos);
  Tensor c = input(g, "c", F32, {3, 2});
  msg = error_of([&] { mul(a, c); });
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
  Tensor d = input(g, "d", F32, {Expr::var("n")});
  msg = error_of([&] { eq(a, d); });
  EXPECT_NE(msg.find("[n]"), std::string::npos) << msg;
}

TEST(ElementwiseErrors, NegOfBoolThrows) {
  Graph g;
  Tensor b = input(g, "b", BOOL, {2});
  EXPECT_THROW(neg(b), Error);
  EXPECT_THROW(-b, Error);
  EXPECT_THROW(sub(b, b), Error);
}

TEST(ElementwiseErrors, OperandsFromDifferentGraphs) {
  Graph g1, g2;
  Tensor a = input(g1, "a", F32, {2});
  Tensor b = input(g2, "b", F32, {2});
  std::string msg = error_of([&] { add(a, b); });
  EXPECT_NE(msg.find("different graphs"), std::string::npos) << msg;
  EXPECT_THROW(lt(a, b), Error);
  EXPECT_THROW(logical_and(a, b), Error);
  EXPECT_THROW(maximum(a, b), Error);
  EXPECT_THROW(where(gt(a, a), b, b), Error);
  EXPECT_THROW(clamp(a, b, b), Error);
  EXPECT_THROW(add(a, Tensor()), Error);
}

TEST(ElementwiseErrors, AxisOutOfRange) {
  Graph g;
  Tensor x = input(g, "x", F32, {2, 3});
  std::string msg = error_of([&] { x.transpose(0, 2); });
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  EXPECT_THROW(x.transpose(-3, 0), Error);
  EXPECT_THROW(x.slice(2, 0, 1), Error);
  EXPECT_THROW(x.dim(2), Error);
  EXPECT_THROW(x.unsqueeze(4), Error);
  EXPECT_THROW(tril(input(g, "v", F32, {3})), Error);  // needs two dims
}

}  // namespace
}  // namespace luminal
