// softmax, log_softmax, layer_norm, rms_norm, matmul (every numpy case), linear, against
// naive loops in double.
#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;
using Lane = std::vector<double>;

Lane softmax_lane(const Lane& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  Lane r;
  for (double x : v) r.push_back(std::exp(x - m) / s);
  return r;
}
Lane log_softmax_lane(const Lane& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  Lane r;
  for (double x : v) r.push_back(x - m - std::log(s));
  return r;
}

TEST(NNSoftmax, AxesAndRowsSumToOne) {
  Ref x = ramp({2, 3, 4}, 0.7, 11, -3.0);
  for (int axis : {0, 1, 2, -1}) {
    Case c;
    Tensor t = c.in("x", x);
    lm::softmax(t, axis).output("p");
    lm::sum(lm::softmax(t, axis), {axis}).output("s");
    lm::log_softmax(t, axis).output("lp");
    Interpreter rt = c.run_all();
    EXPECT_TRUE(near(along(x, axis, softmax_lane), rt.output("p"), 1e-5, 1e-7)) << axis;
    EXPECT_TRUE(near(along(x, axis, log_softmax_lane), rt.output("lp"), 1e-5, 1e-6)) << axis;
    Ref ones = reduce(x, {axis}, false, [](const Lane&) { return 1.0; });
    EXPECT_TRUE(near(ones, rt.output("s"), 1e-6, 1e-6)) << axis;
  }
  // Hand-checked: softmax([0, ln 3]) = [0.25, 0.75].
  Case c;
  Buffer p = c.run(lm::softmax(c.in("x", Ref({2}, {0, std::log(3.0)})), 0));
  EXPECT_TRUE(near(Ref({2}, {0.25, 0.75}), p, 1e-6, 0));
}

TEST(NNSoftmax, LargeLogitsAndNegativeInfinity) {
  Ref x({3, 3}, {1000, 1000, 999,
                 -kInf, 0, -kInf,
                 -1000, -kInf, -1001});
  Case c;
  Tensor t = c.in("x", x);
  lm::softmax(t, 1).output("p");
  lm::log_softmax(t, 1).output("lp");
  Interpreter rt = c.run_all();
  Buffer p = rt.output("p");
  EXPECT_TRUE(near(along(x, 1, softmax_lane), p, 1e-5, 1e-7));
  EXPECT_EQ(p.get(3), 0.0);  // exp(-inf) is exactly 0
  EXPECT_EQ(p.get(4), 1.0);
  EXPECT_EQ(p.get(5), 0.0);
  EXPECT_EQ(p.get(7), 0.0);
  Buffer lp = rt.output("lp");
  EXPECT_TRUE(near(along(x, 1, log_softmax_lane), lp, 1e-6, 1e-5));
  EXPECT_EQ(lp.get(3), -kInf);
  EXPECT_EQ(lp.get(4), 0.0);
  // Integer logits give f32 probabilities.
  Case ci;
  Buffer pi = ci.run(lm::softmax(ci.in("x", Ref({2}, {1, 1}), DType::I32), 0));
  EXPECT_TRUE(same(Ref({2}, {0.5, 0.5}), pi, DType::F32));
}

TEST(NNSoftmax, SymbolicAxisAndMaskedPadding) {
  Expr n = Expr::var("n");
  Case c;
  Tensor t = c.in("x", Ref({2, 1}, {0, 0}), DType::F32, {2, n});
  lm::softmax(t, 1).output("p");
  lm::log_softmax(t, -1).output("lp");
  lm::softmax(lm::pad(t, {{0, 0}, {0, 2}}, -kInf), 1).output("masked");  // padded slots get 0
  for (int64_t len : {1, 3, 4}) {
    Ref x = ramp({2, len}, 1.5, 7, -4.0);
    c.set("x", x, DType::F32);
    Interpreter rt = c.run_all();
    std::string ctx = "n=" + std::to_string(len);
    EXPECT_TRUE(near(along(x, 1, softmax_lane), rt.output("p"), 1e-5, 1e-7)) << ctx;
    EXPECT_TRUE(near(along(x, 1, log_softmax_lane), rt.output("lp"), 1e-5, 1e-6)) << ctx;
    EXPECT_TRUE(near(along(pad(x, {{0, 0}, {0, 2}}, -kInf), 1, softmax_lane), rt.output("masked"), 1e-5, 0)) << ctx;
  }
}

Ref layer_norm_ref(const Ref& x, int dims, const Ref* w, const Ref* b, double eps) {
  int64_t inner = 1;
  for (int i = 0; i < dims; ++i) inner *= x.shape[x.rank() - 1 - i];
  Ref r = x;
  for (int64_t o = 0; o < x.numel() / inner; ++o) {
    double mu = 0, var = 0;
    for (int64_t k = 0; k < inner; ++k) mu += x.data[o * inner + k];
    mu /= static_cast<double>(inner);
    for (int64_t k = 0; k < inner; ++k) var += (x.data[o * inner + k] - mu) * (x.data[o * inner + k] - mu);
    var /= static_cast<double>(inner);
    for (int64_t k = 0; k < inner; ++k) {
      double v = (x.data[o * inner + k] - mu) / std::sqrt(var + eps);
      if (w) v *= w->data[k];
      if (b) v += b->data[k];
      r.data[o * inner + k] = v;
    }
  }
  return r;
}

TEST(NNNorm, LayerNorm) {
  Ref x = ramp({2, 3, 4}, 0.9, 13, -4.0);
  Ref w1 = ramp({4}, 0.5, 5, 0.25), b1 = ramp({4}, 1.0, 3, -1.0);
  Ref w2 = ramp({3, 4}, 0.25, 7, 0.5), b2 = ramp({3, 4}, 0.5, 4, -0.5);
  for (int dims : {1, 2})
    for (int variant = 0; variant < 4; ++variant) {
      bool hw = variant & 1, hb = variant & 2;
      const Ref& w = dims == 1 ? w1 : w2;
      const Ref& b = dims == 1 ? b1 : b2;
      Case c;
      Tensor t = c.in("x", x);
      std::optional<Tensor> tw, tb;
      if (hw) tw = c.in("w", w);
      if (hb) tb = c.in("b", b);
      Buffer got = c.run(lm::layer_norm(t, dims, tw, tb));
      Ref want = layer_norm_ref(x, dims, hw ? &w : nullptr, hb ? &b : nullptr, 1e-5);
      EXPECT_TRUE(near(want, got, 1e-4, 1e-5)) << "dims " << dims << " weight " << hw << " bias " << hb;
    }
  // Hand-checked: [1, 3] -> [-1, 1] (up to eps); custom eps honoured.
  Case c;
  Buffer got = c.run(lm::layer_norm(c.in("x", Ref({1, 2}, {1, 3})), 1, std::nullopt, std::nullopt, 0.0));
  EXPECT_TRUE(near(Ref({1, 2}, {-1, 1}), got, 1e-6, 1e-6));
  Case c2;
  Buffer got2 = c2.run(lm::layer_norm(c2.in("x", Ref({2}, {1, 3})), 1, std::nullopt, std::nullopt, 3.0));
  EXPECT_TRUE(near(Ref({2}, {-0.5, 0.5}), got2, 1e-6, 1e-6));  // 1 / sqrt(1 + 3)
}

TEST(NNNorm, RmsNorm) {
  Ref x = ramp({3, 5}, 0.8, 9, -3.0);
  Ref w = ramp({5}, 0.5, 4, 0.5);
  for (bool hw : {false, true}) {
    Ref want = make(x.shape, [&](const Idx& q) {
      double ms = 0;
      for (int64_t k = 0; k < 5; ++k) ms += x.at({q[0], k}) * x.at({q[0], k});
      double v = x.at(q) / std::sqrt(ms / 5 + 1e-6);
      return hw ? v * w.data[q[1]] : v;
    });
    Case c;
    Tensor t = c.in("x", x);
    std::optional<Tensor> tw;
    if (hw) tw = c.in("w", w);
    EXPECT_TRUE(near(want, c.run(lm::rms_norm(t, tw)), 1e-5, 1e-6)) << hw;
  }
  Case c;  // hand-checked: [3, 4] / sqrt(12.5)
  Buffer got = c.run(lm::rms_norm(c.in("x", Ref({2}, {3, 4})), std::nullopt, 0.0));
  EXPECT_TRUE(near(Ref({2}, {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)}), got, 1e-6, 0));
}

// numpy matmul, naively: vectors get a temporary dim, batch dims broadcast.
Ref matmul_ref(const Ref& a0, const Ref& b0) {
  bool av = a0.rank() == 1, bv = b0.rank() == 1;
  Ref a = av ? reshape(a0, {1, a0.shape[0]}) : a0;
  Ref b = bv ? reshape(b0, {b0.shape[0], 1}) : b0;
  size_t ra = a.rank() - 2, rb = b.rank() - 2, nb = std::max(ra, rb);
  Idx batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    int64_t da = i + ra >= nb ? a.shape[i + ra - nb] : 1, db = i + rb >= nb ? b.shape[i + rb - nb] : 1;
    batch[i] = std::max(da, db);
  }
  int64_t m = a.shape[ra], k = a.shape[ra + 1], n = b.shape[rb + 1];
  Idx out = batch;
  out.push_back(m);
  out.push_back(n);
  Ref r = make(out, [&](const Idx& c) {
    Idx ia, ib;
    for (size_t i = nb - ra; i < nb; ++i) ia.push_back(a.shape[i - (nb - ra)] == 1 ? 0 : c[i]);
    for (size_t i = nb - rb; i < nb; ++i) ib.push_back(b.shape[i - (nb - rb)] == 1 ? 0 : c[i]);
    double acc = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      Idx pa = ia, pb = ib;
      pa.push_back(c[nb]);
      pa.push_back(kk);
      pb.push_back(kk);
      pb.push_back(c[nb + 1]);
      acc += a.at(pa) * b.at(pb);
    }
    return acc;
  });
  Idx s = r.shape;
  if (bv) s.pop_back();
  if (av) s.erase(s.end() - (bv ? 1 : 2));
  return reshape(r, s);
}

Buffer run_mm(const Ref& a, const Ref& b, DType t = DType::F32) {
  Case c;
  Tensor ta = c.in("a", a, t), tb = c.in("b", b, t);
  return c.run(lm::matmul(ta, tb));
}

TEST(NNMatmul, EveryRankCombination) {
  struct M { Idx a, b, out; };
  for (const M& m : {M{{5}, {5}, {}}, M{{3, 5}, {5}, {3}}, M{{5}, {5, 2}, {2}}, M{{3, 5}, {5, 2}, {3, 2}},
                     M{{1, 1}, {1, 1}, {1, 1}}, M{{2, 3, 4}, {2, 4, 5}, {2, 3, 5}}, M{{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},
                     M{{2, 3, 4}, {4}, {2, 3}}, M{{4}, {2, 4, 5}, {2, 5}}, M{{3, 4}, {2, 4, 5}, {2, 3, 5}},
                     M{{2, 1, 3}, {1, 3, 3}, {2, 1, 3}}, M{{3, 1}, {1, 4}, {3, 4}}}) {
    Ref a = ramp(m.a, 0.5, 7, -1.5), b = ramp(m.b, 0.25, 9, -1.0);
    Ref want = matmul_ref(a, b);
    ASSERT_EQ(want.shape, m.out);
    EXPECT_TRUE(near(want, run_mm(a, b), 1e-5, 1e-5)) << str(m.a) << " @ " << str(m.b);
  }
  // Hand-checked 2x2.
  EXPECT_TRUE(same(Ref({2, 2}, {19, 22, 43, 50}), run_mm(Ref({2, 2}, {1, 2, 3, 4}), Ref({2, 2}, {5, 6, 7, 8}))));
  EXPECT_TRUE(same(Ref({}, {32}), run_mm(Ref({3}, {1, 2, 3}), Ref({3}, {4, 5, 6}))));
  // i32 matmul stays i32 and wraps: [3 + 2*INT_MAX, 3 + INT_MAX].
  EXPECT_TRUE(same(Ref({2}, {1, -2147483648.0 + 2}),
                   run_mm(Ref({2, 2}, {1, 2, 1, 1}), Ref({2}, {3, 2147483647.0}), DType::I32), DType::I32));
}

TEST(NNMatmul, TransposedAndSlicedInputs) {
  Ref a = ramp({4, 3}), b = ramp({5, 4}, 0.25, 9, -1.0);
  Case c;
  Tensor ta = c.in("a", a), tb = c.in("b", b);
  lm::matmul(ta.transpose(0, 1), tb.transpose(0, 1)).output("t");    // [3,4] @ [4,5]
  lm::matmul(tb, ta).output("n");                                     // [5,4] @ [4,3]
  lm::matmul(lm::slice(tb, 0, 1, 5, 2), lm::flip(ta, {0})).output("s");  // [2,4] @ [4,3]
  Interpreter rt = c.run_all();
  EXPECT_TRUE(near(matmul_ref(transpose(a, 0, 1), transpose(b, 0, 1)), rt.output("t")));
  EXPECT_TRUE(near(matmul_ref(b, a), rt.output("n")));
  EXPECT_TRUE(near(matmul_ref(slice(b, 0, 1, 5, 2), flip(a, {0})), rt.output("s")));
  // Batched with the batch dim permuted into place.
  Ref x = ramp({3, 2, 4}), y = ramp({2, 4, 3}, 0.5, 5, -1.0);
  Case c2;
  Tensor tx = c2.in("x", x), ty = c2.in("y", y);
  EXPECT_TRUE(near(matmul_ref(permute(x, {1, 0, 2}), y), c2.run(lm::matmul(lm::permute(tx, {1, 0, 2}), ty))));
}

TEST(NNMatmul, SymbolicRows) {
  Expr m = Expr::var("m");
  Ref b = ramp({4, 3}, 0.5, 7, -1.0);
  Case c;
  Tensor ta = c.in("a", ramp({1, 4}), DType::F32, {m, 4}), tb = c.in("b", b);
  Tensor y = lm::matmul(ta, tb);
  EXPECT_EQ(lm::to_string(y.shape()), "[m, 3]");
  y.output("y");
  lm::matmul(tb.transpose(0, 1), ta.transpose(0, 1)).output("yt");  // [3, m]
  for (int64_t rows : {1, 3}) {
    Ref a = ramp({rows, 4}, 0.75, 11, -2.0);
    c.set("a", a, DType::F32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(near(matmul_ref(a, b), rt.output("y"))) << "m=" << rows;
    EXPECT_TRUE(near(transpose(matmul_ref(a, b), 0, 1), rt.output("yt"))) << "m=" << rows;
  }
}

TEST(NNMatmul, SymbolicInnerDimAndNormOverIt) {
  Expr k = Expr::var("k");
  Case c;
  Tensor a = c.in("a", Ref({2, 1}, {0, 0}), DType::F32, {2, k});
  Tensor v = c.in("v", Ref({1}, {0}), DType::F32, {k});
  lm::matmul(a, v).output("mv");
  lm::matmul(v, v).output("vv");
  lm::matmul(a, a.transpose(0, 1)).output("gram");
  lm::layer_norm(a, 1, std::nullopt, std::nullopt).output("ln");
  for (int64_t len : {1, 5}) {
    Ref av = ramp({2, len}, 0.5, 7, -1.0), vv = ramp({len}, 0.25, 5, -0.5);
    c.set("a", av, DType::F32);
    c.set("v", vv, DType::F32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(near(matmul_ref(av, vv), rt.output("mv"))) << len;
    EXPECT_TRUE(near(matmul_ref(vv, vv), rt.output("vv"))) << len;
    EXPECT_TRUE(near(matmul_ref(av, transpose(av, 0, 1)), rt.output("gram"))) << len;
    EXPECT_TRUE(near(layer_norm_ref(av, 1, nullptr, nullptr, 1e-5), rt.output("ln"), 1e-4, 1e-5)) << len;
  }
}

TEST(NNLinear, WithAndWithoutBias) {
  Ref x = ramp({2, 2, 3}), w = ramp({4, 3}, 0.5, 7, -1.5), bias = ramp({4}, 1.0, 5, -2.0);
  Ref xw = matmul_ref(x, transpose(w, 0, 1));
  Ref want = make(xw.shape, [&](const Idx& q) { return xw.at(q) + bias.data[q.back()]; });
  Case c;
  Tensor tx = c.in("x", x), tw = c.in("w", w), tb = c.in("b", bias);
  lm::linear(tx, tw, tb).output("yb");
  lm::linear(tx, tw, std::nullopt).output("y");
  lm::linear(lm::select(tx, 0, 1), tw, tb).output("y2");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(near(want, rt.output("yb")));
  EXPECT_TRUE(near(xw, rt.output("y")));
  EXPECT_TRUE(near(reshape(slice(want, 0, 1, 2), {2, 4}), rt.output("y2")));
  // Hand-checked: [1, 2] @ [[1, 1], [0, 3]]^T + [10, 20] = [13, 26].
  Case h;
  Buffer got = h.run(lm::linear(h.in("x", Ref({2}, {1, 2})), h.in("w", Ref({2, 2}, {1, 1, 0, 3})),
                                h.in("b", Ref({2}, {10, 20}))));
  EXPECT_TRUE(same(Ref({2}, {13, 26}), got));
}

TEST(NNErrors, ShapesAndAxes) {
  Graph g;
  Tensor a = lm::input(g, "a", DType::F32, {3, 5});
  Tensor b = lm::input(g, "b", DType::F32, {4, 2});
  Tensor v3 = lm::input(g, "v3", DType::F32, {3});
  Tensor v4 = lm::input(g, "v4", DType::F32, {4});
  Tensor s = lm::constant(g, 1.0);
  EXPECT_TRUE(throws_error([&] { lm::matmul(a, b); }, {"matmul", "[3, 5]", "[4, 2]"}));
  EXPECT_TRUE(throws_error([&] { lm::matmul(v3, v4); }, {"matmul", "[3]", "[4]"}));
  EXPECT_TRUE(throws_error([&] { lm::matmul(a, v4); }, {"matmul", "[3, 5]"}));
  EXPECT_TRUE(throws_error([&] { lm::matmul(v3, b); }, {"matmul", "[4, 2]"}));
  EXPECT_TRUE(throws_error([&] { lm::matmul(s, a); }, {"matmul"}));
  Tensor x = lm::input(g, "x", DType::F32, {2, 3, 4}), y = lm::input(g, "y", DType::F32, {3, 4, 5});
  EXPECT_TRUE(throws_error([&] { lm::matmul(x, y); }, {"shape mismatch"}));  // batch 2 vs 3
  EXPECT_TRUE(throws_error([&] { lm::softmax(a, 2); }, {"out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::log_softmax(a, -3); }, {"out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::layer_norm(a, 3, std::nullopt, std::nullopt); }, {"layer_norm", "[3, 5]"}));
  EXPECT_TRUE(throws_error([&] { lm::layer_norm(a, 0, std::nullopt, std::nullopt); }, {"layer_norm"}));
  EXPECT_TRUE(throws_error([&] { lm::linear(a, v4, std::nullopt); }, {"linear", "[out, in]"}));
  EXPECT_TRUE(throws_error([&] { lm::linear(a, b, std::nullopt); }, {"matmul", "[3, 5]", "[2, 4]"}));
}

// luminal::Error promises messages that name the thing: a batch mismatch should name matmul and
// the operands' shapes, not the internal mul of [2, 3, 4, 1] and [3, 1, 4, 5].
TEST(NNErrors, MatmulBatchMismatchNamesOperands) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {2, 3, 4}), y = lm::input(g, "y", DType::F32, {3, 4, 5});
  EXPECT_TRUE(throws_error([&] { lm::matmul(x, y); }, {"matmul", "[2, 3, 4]", "[3, 4, 5]"}));
}

}  // namespace
