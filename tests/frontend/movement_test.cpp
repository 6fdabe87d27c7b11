// Movement ops (views, concat/stack/split, pad, repeat, unfold...) against naive loops.
#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;

// Runs `f` on one input of the given dtype and compares exactly with `want`.
::testing::AssertionResult check1(const Ref& x, DType t, const std::function<Tensor(const Tensor&)>& f,
                                  const Ref& want, DType out_t) {
  Case c;
  Tensor in = c.in("x", x, t);
  return same(want, c.run(f(in)), out_t);
}
::testing::AssertionResult check1(const Ref& x, const std::function<Tensor(const Tensor&)>& f, const Ref& want) {
  return check1(x, DType::F32, f, want, DType::F32);
}

Ref bools(const Idx& s) { return make(s, [&](const Idx& c) { return static_cast<double>((ravel(c, s) * 5 + 1) % 3 == 0); }); }
Ref ints(const Idx& s) { return make(s, [&](const Idx& c) { return static_cast<double>(ravel(c, s) * 37 % 101 - 50); }); }

TEST(MovementReshape, ConstantShapesAndInference) {
  Ref x = ramp({2, 3, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(t, {4, 6}); }, reshape(x, {4, 6})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(t, {-1, 2}); }, reshape(x, {12, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(t, {3, -1, 2}); }, reshape(x, {3, 4, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return t.reshape({24}); }, reshape(x, {24})));
  Ref xi = ints({6});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::reshape(t, {2, -1}); }, reshape(xi, {2, 3}),
                     DType::I32));
  Ref xb = bools({6});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::reshape(t, {3, 1, 2}); }, reshape(xb, {3, 1, 2}),
                     DType::Bool));
}

TEST(MovementReshape, SymbolicLeadingDim) {
  Expr s = Expr::var("s");
  Case c;
  Tensor x = c.in("x", ramp({1, 6}), DType::F32, {s, 6});
  Tensor y = lm::reshape(x, {s, 2, 3});
  EXPECT_EQ(lm::to_string(y.shape()), "[s, 2, 3]");
  y.output("y");
  lm::reshape(x, {-1, 3}).output("z");  // -1 = 2*s
  for (int64_t n : {1, 3}) {
    Ref xv = ramp({n, 6});
    c.set("x", xv, DType::F32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(same(reshape(xv, {n, 2, 3}), rt.output("y"))) << "s=" << n;
    EXPECT_TRUE(same(reshape(xv, {2 * n, 3}), rt.output("z"))) << "s=" << n;
  }
}

TEST(MovementPermute, AxesOrders) {
  Ref x = ramp({2, 3, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::permute(t, {2, 0, 1}); }, permute(x, {2, 0, 1})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::permute(t, {-1, 1, 0}); }, permute(x, {2, 1, 0})));
  Ref xi = ints({3, 2, 2});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return t.permute({1, 2, 0}); }, permute(xi, {1, 2, 0}),
                     DType::I32));
  // Hand-checked: [[0,1,2],[3,4,5]]^T.
  Ref m({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(check1(m, [](const Tensor& t) { return lm::permute(t, {1, 0}); }, Ref({3, 2}, {0, 3, 1, 4, 2, 5})));
}

TEST(MovementTranspose, PairsOfAxes) {
  Ref x = ramp({2, 3, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::transpose(t, 0, 2); }, transpose(x, 0, 2)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return t.transpose(-1, -2); }, transpose(x, 1, 2)));
  Ref xb = bools({2, 3});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::transpose(t, 0, 1); }, transpose(xb, 0, 1),
                     DType::Bool));
}

TEST(MovementSqueeze, UnsqueezeAndSqueeze) {
  Ref x = ramp({3, 2});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unsqueeze(t, 0); }, reshape(x, {1, 3, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unsqueeze(t, 1); }, reshape(x, {3, 1, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unsqueeze(t, -1); }, reshape(x, {3, 2, 1})));
  Ref y = ramp({1, 3, 1, 2});
  EXPECT_TRUE(check1(y, [](const Tensor& t) { return lm::squeeze(t, 2); }, reshape(y, {1, 3, 2})));
  EXPECT_TRUE(check1(y, [](const Tensor& t) { return lm::squeeze(t, 0); }, reshape(y, {3, 1, 2})));
  EXPECT_TRUE(check1(y, [](const Tensor& t) { return lm::squeeze(t); }, reshape(y, {3, 2})));
  Ref yi = ints({1, 1, 4});
  EXPECT_TRUE(check1(yi, DType::I32, [](const Tensor& t) { return lm::squeeze(t); }, reshape(yi, {4}), DType::I32));
  EXPECT_TRUE(throws_error([&] {
    Graph g;
    lm::squeeze(lm::input(g, "x", DType::F32, {2, 3}), 0);
  }, {"squeeze"}));
}

TEST(MovementExpand, ExpandAndBroadcastTo) {
  Ref x({3, 1}, {1, 2, 3});
  Ref want = make({2, 3, 4}, [&](const Idx& c) { return x.at({c[1], 0}); });
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::expand(t, {2, -1, 4}); }, want));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::broadcast_to(t, {2, 3, 4}); }, want));
  Ref row({1, 3}, {5, 6, 7});
  EXPECT_TRUE(check1(row, [](const Tensor& t) { return t.expand({2, 3}); }, Ref({2, 3}, {5, 6, 7, 5, 6, 7})));
  Ref b({2}, {1, 0});
  EXPECT_TRUE(check1(b, DType::Bool, [](const Tensor& t) { return lm::broadcast_to(t, {3, 2}); },
                     Ref({3, 2}, {1, 0, 1, 0, 1, 0}), DType::Bool));
  EXPECT_TRUE(throws_error([&] {
    Graph g;
    lm::broadcast_to(lm::input(g, "x", DType::F32, {2, 3}), {4, 3});
  }, {"broadcast"}));
}

TEST(MovementFlatten, Ranges) {
  Ref x = ramp({2, 3, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flatten(t); }, reshape(x, {24})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flatten(t, 1); }, reshape(x, {2, 12})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flatten(t, 0, 1); }, reshape(x, {6, 4})));
  {  // rank 0 -> [1]; squeeze of all-ones -> rank 0; unsqueeze of rank 0 -> [1]
    Case c;
    Tensor t = c.in("x", Ref({1, 1}, {4.5}));
    lm::flatten(lm::squeeze(t)).output("f");
    lm::squeeze(t).output("s");
    lm::unsqueeze(lm::squeeze(t), 0).output("u");
    Interpreter rt = c.run_all();
    EXPECT_TRUE(same(Ref({1}, {4.5}), rt.output("f")));
    EXPECT_TRUE(same(Ref({}, {4.5}), rt.output("s")));
    EXPECT_TRUE(same(Ref({1}, {4.5}), rt.output("u")));
  }
  // flatten of a transposed view reads in the view's order
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flatten(lm::transpose(t, 0, 2)); },
                     reshape(transpose(x, 0, 2), {24})));
}

TEST(MovementSlice, PythonBoundsAndSteps) {
  Ref v({7}, {0, 1, 2, 3, 4, 5, 6});
  auto sl = [&](int64_t a, int64_t b, int64_t step, std::vector<double> want) {
    Idx ws{static_cast<int64_t>(want.size())};
    return check1(v, [=](const Tensor& t) { return lm::slice(t, 0, a, b, step); }, Ref(ws, want));
  };
  EXPECT_TRUE(sl(2, 5, 1, {2, 3, 4}));
  EXPECT_TRUE(sl(-3, 7, 1, {4, 5, 6}));
  EXPECT_TRUE(sl(-5, -1, 1, {2, 3, 4, 5}));
  EXPECT_TRUE(sl(0, 7, 2, {0, 2, 4, 6}));
  EXPECT_TRUE(sl(1, 7, 2, {1, 3, 5}));
  EXPECT_TRUE(sl(1, 7, 3, {1, 4}));
  EXPECT_TRUE(sl(0, 6, 3, {0, 3}));
  EXPECT_TRUE(sl(-100, 100, 1, {0, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(sl(5, 2, 1, {}));
  EXPECT_TRUE(sl(10, 20, 1, {}));
  EXPECT_TRUE(sl(6, 100, 4, {6}));
  EXPECT_TRUE(sl(3, 3, 1, {}));
  EXPECT_TRUE(sl(-1, -4, 2, {}));

  Ref x = ramp({5, 6});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::slice(t, 1, -4, -1); }, slice(x, 1, 2, 5)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return t.slice(0, 1, 5, 2); }, slice(x, 0, 1, 5, 2)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::slice(t, -1, 0, 6, 3); }, slice(x, 1, 0, 6, 3)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::slice(t, 1, 4, 2); }, slice(x, 1, 4, 4)));  // [5, 0]
  Ref xi = ints({4, 5});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::slice(t, 1, 1, 5, 2); }, slice(xi, 1, 1, 5, 2),
                     DType::I32));
  Ref xb = bools({4, 5});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::slice(t, 0, -3, 4, 2); }, slice(xb, 0, 1, 4, 2),
                     DType::Bool));
}

TEST(MovementSlice, NarrowAndSelect) {
  Ref x = ramp({5, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::narrow(t, 1, 1, 2); }, slice(x, 1, 1, 3)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::narrow(t, 0, -2, 2); }, slice(x, 0, 3, 5)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::select(t, 0, -1); }, reshape(slice(x, 0, 4, 5), {4})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::select(t, 1, 2); }, reshape(slice(x, 1, 2, 3), {5})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::select(t, -1, -4); }, reshape(slice(x, 1, 0, 1), {5})));
  Ref xi = ints({3, 2, 2});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::select(t, 1, -1); },
                     make({3, 2}, [&](const Idx& c) { return xi.at({c[0], 1, c[1]}); }), DType::I32));
}

TEST(MovementPad, ValuesAndAxes) {
  Ref x = ramp({2, 3});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::pad(t, {{1, 2}, {0, 1}}); }, pad(x, {{1, 2}, {0, 1}}, 0)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::pad(t, {{0, 0}, {2, 1}}, -kInf); },
                     pad(x, {{0, 0}, {2, 1}}, -kInf)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::pad(t, {{1, 1}}, 7); }, pad(x, {{1, 1}}, 7)));  // leading only
  // Hand-checked 1-D case.
  EXPECT_TRUE(check1(Ref({2}, {1, 2}), [](const Tensor& t) { return lm::pad(t, {{2, 1}}, 7); },
                     Ref({5}, {7, 7, 1, 2, 7})));
  Ref x3 = ramp({2, 2, 3});
  EXPECT_TRUE(check1(x3, [](const Tensor& t) { return lm::pad(t, {{1, 0}, {0, 0}, {1, 1}}, 2.5); },
                     pad(x3, {{1, 0}, {0, 0}, {1, 1}}, 2.5)));
  Ref xi = ints({2, 2});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::pad(t, {{1, 0}, {1, 1}}, 7); },
                     pad(xi, {{1, 0}, {1, 1}}, 7), DType::I32));
  Ref xb = bools({2, 2});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::pad(t, {{0, 1}, {1, 0}}, 1); },
                     pad(xb, {{0, 1}, {1, 0}}, 1), DType::Bool));
  // A second pad with a different value on top of the first.
  Ref want = pad(pad(x, {{1, 0}}, 0), {{0, 0}, {1, 1}}, 7);
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::pad(lm::pad(t, {{1, 0}}), {{0, 0}, {1, 1}}, 7); }, want));
  EXPECT_TRUE(throws_error([&] {
    Graph g;
    lm::pad(lm::input(g, "x", DType::F32, {2}), {{-1, 0}});
  }, {"pad"}));
}

TEST(MovementConcat, AxesAndCounts) {
  Ref a = ramp({2, 3}), b = ramp({1, 3}, 1.0, 7, 3.0), c3 = ramp({2, 2}, 2.0, 5, -1.0);
  {
    Case c;
    Tensor ta = c.in("a", a), tb = c.in("b", b);
    EXPECT_TRUE(same(concat({a, b}, 0), c.run(lm::concat({ta, tb}, 0))));
  }
  {
    Case c;
    Tensor ta = c.in("a", a), tc = c.in("c", c3);
    EXPECT_TRUE(same(concat({a, c3, a}, 1), c.run(lm::concat({ta, tc, ta}, 1))));
  }
  {
    Case c;
    Tensor ta = c.in("a", a), tc = c.in("c", c3);
    EXPECT_TRUE(same(concat({c3, a}, -1), c.run(lm::concat({tc, ta}, -1))));
  }
  {  // hand-checked
    Case c;
    Tensor p = c.in("p", Ref({2}, {1, 2})), q = c.in("q", Ref({3}, {3, 4, 5}));
    EXPECT_TRUE(same(Ref({5}, {1, 2, 3, 4, 5}), c.run(lm::concat({p, q}, 0))));
  }
  {  // a single input is returned as is
    Case c;
    Tensor ta = c.in("a", a);
    EXPECT_TRUE(same(a, c.run(lm::concat({ta}, 1))));
  }
}

TEST(MovementConcat, DtypesPromoteAndSpecialValuesKept) {
  Ref f({2}, {kInf, kNaN}), i({3}, {-2147483647.0 - 1, 2147483647.0, 5}), bl({2}, {1, 0});
  {
    Case c;
    Tensor tf = c.in("f", f), ti = c.in("i", i, DType::I32);
    Ref want({5}, {kInf, kNaN, -2147483648.0, 2147483648.0, 5});  // i32 -> f32 rounds INT_MAX up
    EXPECT_TRUE(same(want, c.run(lm::concat({tf, ti}, 0)), DType::F32));
  }
  {
    Case c;
    Tensor ti = c.in("i", i, DType::I32), tb = c.in("b", bl, DType::Bool);
    EXPECT_TRUE(same(concat({bl, i}, 0), c.run(lm::concat({tb, ti}, 0)), DType::I32));
  }
  {
    Case c;
    Tensor tb = c.in("b", bl, DType::Bool);
    EXPECT_TRUE(same(concat({bl, bl, bl}, 0), c.run(lm::concat({tb, tb, tb}, 0)), DType::Bool));
  }
  {
    Case c;
    Ref x({2, 2}, {-kInf, kNaN, 0x1p100, -0x1p-100});
    Tensor tx = c.in("x", x);
    EXPECT_TRUE(same(concat({x, x, x}, 1), c.run(lm::concat({tx, tx, tx}, 1))));
  }
}

// torch.cat copies values bit for bit, so -0.0 must stay -0.0.
TEST(MovementConcat, NegativeZeroKept) {
  Case c;
  Ref x({2}, {-0.0, 1.0});
  Tensor tx = c.in("x", x);
  EXPECT_TRUE(same(concat({x, x}, 0), c.run(lm::concat({tx, tx}, 0))));
}

TEST(MovementConcat, OfPaddedAndPermutedViews) {
  Ref x = ramp({2, 3});
  {
    Case c;
    Tensor t = c.in("x", x);
    Ref want = concat({pad(x, {{0, 0}, {1, 0}}, 7), transpose(ramp({4, 2}), 0, 1)}, 0);
    Tensor y = c.in("y", ramp({4, 2}));
    EXPECT_TRUE(same(want, c.run(lm::concat({lm::pad(t, {{0, 0}, {1, 0}}, 7), lm::transpose(y, 0, 1)}, 0))));
  }
  {
    Case c;
    Ref z = ramp({2, 3, 4});
    Tensor t = c.in("z", z);
    Ref want = concat({permute(z, {2, 0, 1}), permute(z, {2, 0, 1})}, 1);
    EXPECT_TRUE(same(want, c.run(lm::concat({lm::permute(t, {2, 0, 1}), lm::permute(t, {2, 0, 1})}, 1))));
  }
}

TEST(MovementStack, Axes) {
  Ref a = ramp({2, 3}), b = ramp({2, 3}, 1.0, 13, 0.0);
  for (int axis : {0, 1, 2, -1}) {
    size_t k = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    Idx s{2, 3};
    s.insert(s.begin() + k, 2);
    Ref want = make(s, [&](const Idx& c) {
      Idx src = c;
      src.erase(src.begin() + k);
      return c[k] == 0 ? a.at(src) : b.at(src);
    });
    Case c;
    Tensor ta = c.in("a", a), tb = c.in("b", b);
    EXPECT_TRUE(same(want, c.run(lm::stack({ta, tb}, axis)))) << "axis " << axis;
  }
  Case c;
  Tensor p = c.in("p", Ref({2}, {1, 2}), DType::I32), q = c.in("q", Ref({2}, {3, 4}), DType::I32);
  EXPECT_TRUE(same(Ref({3, 2}, {1, 2, 3, 4, 1, 2}), c.run(lm::stack({p, q, p}, 0)), DType::I32));
}

TEST(MovementSplit, SplitAndChunk) {
  Ref x = ramp({2, 6});
  {
    Case c;
    auto parts = lm::split(c.in("x", x), {1, 3, 2}, 1);
    ASSERT_EQ(parts.size(), 3u);
    for (size_t i = 0; i < 3; ++i) parts[i].output("p" + std::to_string(i));
    Interpreter rt = c.run_all();
    EXPECT_TRUE(same(slice(x, 1, 0, 1), rt.output("p0")));
    EXPECT_TRUE(same(slice(x, 1, 1, 4), rt.output("p1")));
    EXPECT_TRUE(same(slice(x, 1, 4, 6), rt.output("p2")));
  }
  // torch.chunk: chunk size ceil(n / chunks); fewer chunks when they run out.
  struct K { int64_t n, chunks; std::vector<int64_t> sizes; };
  for (const K& k : {K{7, 3, {3, 3, 1}}, K{5, 3, {2, 2, 1}}, K{6, 4, {2, 2, 2}}, K{5, 2, {3, 2}}, K{4, 1, {4}}}) {
    Ref v = ints({2, k.n});
    Case c;
    auto parts = lm::chunk(c.in("v", v, DType::I32), k.chunks, -1);
    ASSERT_EQ(parts.size(), k.sizes.size()) << "n=" << k.n << " chunks=" << k.chunks;
    int64_t off = 0;
    for (size_t i = 0; i < parts.size(); ++i) parts[i].output("p" + std::to_string(i));
    Interpreter rt = c.run_all();
    for (size_t i = 0; i < parts.size(); ++i) {
      EXPECT_TRUE(same(slice(v, 1, off, off + k.sizes[i]), rt.output("p" + std::to_string(i)), DType::I32));
      off += k.sizes[i];
    }
  }
  EXPECT_TRUE(throws_error([&] {
    Graph g;
    lm::split(lm::input(g, "x", DType::F32, {5}), {2, 2}, 0);
  }, {"split"}));
}

// torch.Tensor.repeat: out[c] = x[c[d] % x.shape[d]] with x left-padded with size-1 dims.
Ref repeat_ref(const Ref& x, const std::vector<int64_t>& reps) {
  Idx xs = x.shape;
  while (xs.size() < reps.size()) xs.insert(xs.begin(), 1);
  Idx s(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) s[i] = xs[i] * reps[i];
  return make(s, [&](const Idx& c) {
    Idx src(c.size());
    for (size_t i = 0; i < c.size(); ++i) src[i] = c[i] % xs[i];
    return x.data[ravel(src, xs)];
  });
}

TEST(MovementRepeat, TorchSemantics) {
  Ref x = ramp({2, 3});
  for (const std::vector<int64_t>& reps : std::vector<std::vector<int64_t>>{{2, 1}, {1, 3}, {2, 2}, {2, 1, 2}, {3, 1, 1}})
    EXPECT_TRUE(check1(x, [&](const Tensor& t) { return lm::repeat(t, reps); }, repeat_ref(x, reps)))
        << "reps " << str(reps);
  // Hand-checked: [1, 2].repeat(2, 2) = [[1,2,1,2],[1,2,1,2]].
  EXPECT_TRUE(check1(Ref({2}, {1, 2}), DType::I32, [](const Tensor& t) { return lm::repeat(t, {2, 2}); },
                     Ref({2, 4}, {1, 2, 1, 2, 1, 2, 1, 2}), DType::I32));
  Ref xb = bools({3});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::repeat(t, {2}); }, repeat_ref(xb, {2}),
                     DType::Bool));
  EXPECT_TRUE(throws_error([&] {
    Graph g;
    lm::repeat(lm::input(g, "x", DType::F32, {2, 3}), {2});
  }, {"repeat"}));
}

TEST(MovementFlip, SeveralAxes) {
  Ref x = ramp({2, 3, 4});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flip(t, {0}); }, flip(x, {0})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flip(t, {0, 2}); }, flip(x, {0, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flip(t, {-1, 1, 0}); }, flip(x, {0, 1, 2})));
  EXPECT_TRUE(check1(Ref({3}, {1, 2, 3}), DType::I32, [](const Tensor& t) { return lm::flip(t, {0}); },
                     Ref({3}, {3, 2, 1}), DType::I32));
}

// torch.Tensor.unfold: axis becomes the window count (n - size) / step + 1, a new last dim
// walks the window: out[..., i, ..., j] = x[..., i*step + j, ...].
Ref unfold_ref(const Ref& x, int axis, int64_t size, int64_t step) {
  size_t a = ax(axis, x.rank());
  Idx s = x.shape;
  s[a] = (x.shape[a] - size) / step + 1;
  s.push_back(size);
  return make(s, [&](const Idx& c) {
    Idx src(c.begin(), c.end() - 1);
    src[a] = c[a] * step + c.back();
    return x.at(src);
  });
}

TEST(MovementUnfold, TorchSemantics) {
  Ref v({5}, {0, 1, 2, 3, 4});
  EXPECT_TRUE(check1(v, [](const Tensor& t) { return lm::unfold(t, 0, 2, 1); },
                     Ref({4, 2}, {0, 1, 1, 2, 2, 3, 3, 4})));
  EXPECT_TRUE(check1(v, [](const Tensor& t) { return lm::unfold(t, 0, 3, 2); }, Ref({2, 3}, {0, 1, 2, 2, 3, 4})));
  Ref x = ramp({3, 7});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(t, 1, 3, 2); }, unfold_ref(x, 1, 3, 2)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(t, 0, 2, 1); }, unfold_ref(x, 0, 2, 1)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(t, -1, 2, 3); }, unfold_ref(x, 1, 2, 3)));
  Ref xi = ints({6});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::unfold(t, 0, 3, 2); }, unfold_ref(xi, 0, 3, 2),
                     DType::I32));
}

TEST(MovementContiguous, MaterialisesViewsExactly) {
  Ref x({2, 3}, {-0.0, kNaN, kInf, -kInf, 1.5, -2});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::contiguous(lm::transpose(t, 0, 1)); }, transpose(x, 0, 1)));
  Ref xi({2, 2}, {-2147483647.0 - 1, 2147483647.0, 0, -1});
  EXPECT_TRUE(check1(xi, DType::I32, [](const Tensor& t) { return lm::contiguous(lm::flip(t, {1})); }, flip(xi, {1}),
                     DType::I32));
  Ref xb = bools({3, 2});
  EXPECT_TRUE(check1(xb, DType::Bool, [](const Tensor& t) { return lm::contiguous(lm::transpose(t, 0, 1)); },
                     transpose(xb, 0, 1), DType::Bool));
  // A padded view materialised and then viewed again.
  EXPECT_TRUE(check1(ramp({2, 2}), [](const Tensor& t) { return lm::transpose(lm::contiguous(lm::pad(t, {{1, 0}}, 9)), 0, 1); },
                     transpose(pad(ramp({2, 2}), {{1, 0}}, 9), 0, 1)));
}

TEST(MovementCompose, ViewsOfViews) {
  Ref x = ramp({4, 6});
  // slice of a transposed tensor
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::slice(lm::transpose(t, 0, 1), 0, 1, 6, 2); },
                     slice(transpose(x, 0, 1), 0, 1, 6, 2)));
  // reshape after a slice (not expressible on the sliced strides)
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(lm::slice(t, 1, 1, 5), {2, 8}); },
                     reshape(slice(x, 1, 1, 5), {2, 8})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(lm::slice(lm::transpose(t, 0, 1), 0, 0, 6, 2), {-1}); },
                     reshape(slice(transpose(x, 0, 1), 0, 0, 6, 2), {12})));
  // flip then step slice then permute of the reshape
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(lm::slice(lm::flip(t, {1}), 1, 0, 6, 3), {2, 2, 2}).permute({2, 1, 0}); },
                     permute(reshape(slice(flip(x, {1}), 1, 0, 6, 3), {2, 2, 2}), {2, 1, 0})));
  // unfold of a transposed view, expand then reshape
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(lm::transpose(t, 0, 1), 1, 2, 2); },
                     unfold_ref(transpose(x, 0, 1), 1, 2, 2)));
  Ref r({3}, {1, 2, 3});
  EXPECT_TRUE(check1(r, [](const Tensor& t) { return lm::reshape(lm::expand(lm::unsqueeze(t, 0), {2, 3}), {3, 2}); },
                     Ref({3, 2}, {1, 2, 3, 1, 2, 3})));
  // math on two different views of one input
  Case c;
  Ref sq = ramp({3, 3});
  Tensor t = c.in("x", sq);
  Ref want = make({3, 3}, [&](const Idx& i) { return sq.at(i) + sq.at({i[1], i[0]}); });
  EXPECT_TRUE(same(want, c.run(t + lm::transpose(t, 0, 1))));
}

TEST(MovementSymbolic, ViewsOverADynamicDim) {
  Expr s = Expr::var("s");
  const int64_t end = INT64_MAX;  // "to the end", as in x[a:]
  Case c;
  Tensor x = c.in("x", ramp({1, 3}), DType::F32, {s, 3});
  Tensor y = c.in("y", ramp({2, 3}, 1.0, 5, 10.0));
  lm::slice(x, 0, 1, end).output("tail");
  lm::slice(x, 0, -2, end).output("last2");
  lm::slice(x, 0, 0, -1).output("init");
  lm::slice(x, 0, 0, end, 2).output("even");
  lm::narrow(x, 0, 1, s - 1).output("narrow");
  lm::pad(x, {{1, 2}, {0, 1}}, 7).output("pad");
  lm::concat({x, y, x}, 0).output("cat");
  lm::flip(x, {0, 1}).output("flip");
  lm::repeat(x, {2, 1}).output("rep");
  lm::unfold(x, 0, 2, 1).output("unfold");
  auto parts = lm::split(x, {Expr(1), s - 1}, 0);
  parts[1].output("split1");
  lm::transpose(lm::reshape(x, {-1}), 0, 0).output("flat");
  for (int64_t n : {1, 2, 5}) {
    Ref v = ramp({n, 3}, 0.5, 13, -3.0);
    c.set("x", v, DType::F32);
    Interpreter rt = c.run_all();
    std::string ctx = "s=" + std::to_string(n);
    EXPECT_TRUE(same(slice(v, 0, std::min<int64_t>(1, n), n), rt.output("tail"))) << ctx;
    EXPECT_TRUE(same(slice(v, 0, std::max<int64_t>(0, n - 2), n), rt.output("last2"))) << ctx;
    EXPECT_TRUE(same(slice(v, 0, 0, n - 1), rt.output("init"))) << ctx;
    EXPECT_TRUE(same(slice(v, 0, 0, n, 2), rt.output("even"))) << ctx;
    EXPECT_TRUE(same(slice(v, 0, 1, n), rt.output("narrow"))) << ctx;
    EXPECT_TRUE(same(pad(v, {{1, 2}, {0, 1}}, 7), rt.output("pad"))) << ctx;
    EXPECT_TRUE(same(concat({v, ramp({2, 3}, 1.0, 5, 10.0), v}, 0), rt.output("cat"))) << ctx;
    EXPECT_TRUE(same(flip(v, {0, 1}), rt.output("flip"))) << ctx;
    EXPECT_TRUE(same(repeat_ref(v, {2, 1}), rt.output("rep"))) << ctx;
    EXPECT_TRUE(same(unfold_ref(v, 0, 2, 1), rt.output("unfold"))) << ctx;
    EXPECT_TRUE(same(slice(v, 0, 1, n), rt.output("split1"))) << ctx;
    EXPECT_TRUE(same(reshape(v, {3 * n}), rt.output("flat"))) << ctx;
  }
  EXPECT_TRUE(throws_error([&] { lm::chunk(x, 2, 0); }, {"chunk", "symbolic", "split"}));
}

TEST(MovementCompose, PaddingInsideOtherViews) {
  Ref v({3}, {1, 2, 3});
  // slice into the padding, reshape a padded view, pad a sliced view, flip a padded view
  EXPECT_TRUE(check1(v, [](const Tensor& t) { return lm::slice(lm::pad(t, {{2, 2}}, 7), 0, 1, 6); },
                     Ref({5}, {7, 1, 2, 3, 7})));
  Ref x = ramp({2, 3});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::reshape(lm::pad(t, {{0, 0}, {1, 0}}, -1), {4, 2}); },
                     reshape(pad(x, {{0, 0}, {1, 0}}, -1), {4, 2})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::pad(lm::slice(t, 1, 1, 3), {{1, 0}, {0, 2}}, 5); },
                     pad(slice(x, 1, 1, 3), {{1, 0}, {0, 2}}, 5)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::flip(lm::pad(t, {{0, 1}, {2, 0}}, 4), {0, 1}); },
                     flip(pad(x, {{0, 1}, {2, 0}}, 4), {0, 1})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::transpose(lm::pad(lm::transpose(t, 0, 1), {{1, 1}}, 3), 0, 1); },
                     transpose(pad(transpose(x, 0, 1), {{1, 1}}, 3), 0, 1)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(lm::pad(t, {{0, 0}, {1, 1}}, 0), 1, 3, 1); },
                     unfold_ref(pad(x, {{0, 0}, {1, 1}}, 0), 1, 3, 1)));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::repeat(lm::pad(t, {{1, 0}}, 8), {1, 2}); },
                     repeat_ref(pad(x, {{1, 0}}, 8), {1, 2})));
}

TEST(MovementCompose, ConcatOfPaddedSlicedAndSymbolicSelect) {
  Ref x = ramp({2, 3}), y = ramp({3, 3}, 1.0, 7, 5.0);
  {
    Case c;
    Tensor tx = c.in("x", x), ty = c.in("y", y);
    // An input already padded with zeros on the concat axis, and a sliced one.
    Ref want = concat({pad(x, {{1, 1}}, 0), slice(y, 0, 1, 3), x}, 0);
    EXPECT_TRUE(same(want, c.run(lm::concat({lm::pad(tx, {{1, 1}}), lm::slice(ty, 0, 1, 3), tx}, 0))));
  }
  {
    Case c;
    Tensor tx = c.in("x", x), ty = c.in("y", y);
    Ref w2 = concat({transpose(x, 0, 1), y}, 1);  // [3, 2] ++ [3, 3]
    EXPECT_TRUE(same(w2, c.run(lm::concat({lm::transpose(tx, 0, 1), ty}, 1))));
  }
  Expr s = Expr::var("s");
  Case c;
  Tensor t = c.in("x", ramp({1, 2}), DType::F32, {s, 2});
  lm::select(t, 0, -1).output("last");
  lm::select(t, 0, s - 1).output("last2");
  lm::narrow(t, 0, -1, 1).output("narrow");
  for (int64_t n : {1, 4}) {
    Ref v = ramp({n, 2});
    c.set("x", v, DType::F32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(same(reshape(slice(v, 0, n - 1, n), {2}), rt.output("last"))) << n;
    EXPECT_TRUE(same(reshape(slice(v, 0, n - 1, n), {2}), rt.output("last2"))) << n;
    EXPECT_TRUE(same(slice(v, 0, n - 1, n), rt.output("narrow"))) << n;
  }
}

TEST(MovementRepeat, ZeroCountsAndWholeWindowUnfold) {
  Ref x = ramp({2, 3});
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::repeat(t, {0, 2}); }, Ref({0, 6}, {})));
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(t, 1, 3, 1); }, unfold_ref(x, 1, 3, 1)));  // one window
  EXPECT_TRUE(check1(x, [](const Tensor& t) { return lm::unfold(t, 1, 1, 5); }, unfold_ref(x, 1, 1, 5)));  // step past end
}

TEST(MovementErrors, ShapesAndAxes) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {2, 3});
  EXPECT_TRUE(throws_error([&] { lm::reshape(x, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"}));
  EXPECT_TRUE(throws_error([&] { lm::reshape(x, {-1, 4}); }, {"reshape", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { lm::reshape(x, {-1, -1}); }, {"reshape"}));
  Tensor y = lm::input(g, "y", DType::F32, {2, 4});
  EXPECT_TRUE(throws_error([&] { lm::concat({x, y}, 0); }, {"concat", "[2, 3]", "[2, 4]"}));
  EXPECT_TRUE(throws_error([&] { lm::transpose(x, 0, 2); }, {"transpose", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::slice(x, -3, 0, 1); }, {"slice", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::permute(x, {0}); }, {"permute"}));
  EXPECT_TRUE(throws_error([&] { lm::permute(x, {0, 0}); }, {"permute"}));
  EXPECT_TRUE(throws_error([&] { lm::unsqueeze(x, 3); }, {"unsqueeze", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::flip(x, {2}); }, {"flip", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::unfold(x, 1, 4, 1); }, {"unfold"}));
  EXPECT_TRUE(throws_error([&] { lm::stack({x, y}, 0); }, {"concat"}));
  EXPECT_TRUE(throws_error([&] { lm::expand(x, {-1, 2, 3}); }, {"expand", "-1"}));
  EXPECT_TRUE(throws_error([&] { lm::expand(x, {3}); }, {"expand"}));
  EXPECT_TRUE(throws_error([&] { lm::concat({}, 0); }, {"concat"}));
  EXPECT_TRUE(throws_error([&] { lm::flatten(x, 1, 0); }, {"flatten"}));
}

}  // namespace
