// Creation ops: constants, full/zeros/ones, arange/iota, triangular masks, tril/triu, cast between
// every dtype pair, and contiguous.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

const DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16, I32 = DType::I32, BOOL = DType::Bool;
const std::vector<DType> kAllDtypes = {F32, F16, BF16, I32, BOOL};

using Dims = std::vector<std::pair<std::string, int64_t>>;

Out make(const std::function<Tensor(Graph&)>& build, const Dims& dims = {}) {
  Graph g;
  Tensor t = build(g);
  return run_const(g, t, dims);
}

// ---- constants and fills ----------------------------------------------------------------------

TEST(CreationConstant, ScalarsOfEachDtype) {
  Out f = make([](Graph& g) { return constant(g, 0.1); });
  EXPECT_EQ(f.dtype, F32);
  EXPECT_TRUE(f.shape.empty());
  expect_exact(f, {0.1f});
  // i32 constants are exact beyond f32's 2^24.
  Out i = make([](Graph& g) { return constant(g, 16777217, I32); });
  EXPECT_EQ(i.dtype, I32);
  expect_exact(i, {16777217});
  expect_exact(make([](Graph& g) { return constant(g, -2147483648.0, I32); }), {-2147483648.0});
  expect_exact(make([](Graph& g) { return constant(g, 2147483647, I32); }), {2147483647});
  Out b = make([](Graph& g) { return stack({constant(g, 0, BOOL), constant(g, 1, BOOL), constant(g, -0.5, BOOL)}, 0); });
  EXPECT_EQ(b.dtype, BOOL);
  expect_exact(b, {0, 1, 1});
  Out h = make([](Graph& g) { return constant(g, 0.1, F16); });
  EXPECT_EQ(h.dtype, F16);
  expect_exact(h, {round_to_dtype(0.1, F16)});
  Out s = make([](Graph& g) { return constant(g, -kInf, BF16); });
  EXPECT_EQ(s.dtype, BF16);
  expect_exact(s, {-kInf});
  Graph g;
  EXPECT_THROW(constant(g, 0.5, I32), Error);
}

TEST(CreationFull, FullZerosOnes) {
  Out f = make([](Graph& g) { return full(g, {2, 3}, 7.5); });
  EXPECT_EQ(f.dtype, F32);
  EXPECT_EQ(f.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(f, std::vector<double>(6, 7.5));
  Out z = make([](Graph& g) { return zeros(g, {3}, I32); });
  EXPECT_EQ(z.dtype, I32);
  expect_exact(z, {0, 0, 0});
  Out o = make([](Graph& g) { return ones(g, {2, 2}, BOOL); });
  EXPECT_EQ(o.dtype, BOOL);
  expect_exact(o, {1, 1, 1, 1});
  Out n = make([](Graph& g) { return full(g, {2}, kNaN, F16); });
  EXPECT_EQ(n.dtype, F16);
  expect_exact(n, {kNaN, kNaN});
  Out r0 = make([](Graph& g) { return full(g, {}, -3); });
  EXPECT_TRUE(r0.shape.empty());
  expect_exact(r0, {-3});
  Out big = make([](Graph& g) { return full(g, {2}, 16777217, I32); });
  expect_exact(big, {16777217, 16777217});
  Out dyn = make([](Graph& g) { return ones(g, {Expr::var("n"), 2}); }, {{"n", 3}});
  EXPECT_EQ(dyn.shape, (std::vector<int64_t>{3, 2}));
  expect_exact(dyn, std::vector<double>(6, 1));
}

TEST(CreationFull, FullLikeKeepsShapeAndDtype) {
  for (DType dt : kAllDtypes) {
    Graph g;
    Tensor x = input(g, "x", dt, {2, 2});
    Out o = run_graph(g, full_like(x, 3), {{"x", Buffer(dt, {2, 2})}});
    EXPECT_EQ(o.dtype, dt) << dtype_name(dt);
    EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 2}));
    expect_exact(o, std::vector<double>(4, dt == BOOL ? 1 : 3), dtype_name(dt));
  }
  Graph g;
  Tensor x = input(g, "x", I32, {Expr::var("n")});
  Out o = run_graph(g, full_like(x, 16777217), {{"x", Buffer(I32, {3})}});
  expect_exact(o, {16777217, 16777217, 16777217});
}

// ---- arange / iota ----------------------------------------------------------------------------

TEST(CreationArange, IntegerRanges) {
  auto check = [](int64_t start, int64_t end, int64_t step, std::vector<double> want) {
    Out o = make([&](Graph& g) { return arange(g, start, end, step); });
    EXPECT_EQ(o.dtype, I32);
    EXPECT_EQ(o.shape, std::vector<int64_t>{static_cast<int64_t>(want.size())});
    expect_exact(o, want, "arange(" + std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(step) + ")");
  };
  check(0, 5, 1, {0, 1, 2, 3, 4});
  check(2, 11, 3, {2, 5, 8});
  check(0, 10, 2, {0, 2, 4, 6, 8});
  check(10, 0, -2, {10, 8, 6, 4, 2});
  check(3, -4, -3, {3, 0, -3});
  check(-5, -2, 1, {-5, -4, -3});
  check(0, 0, 1, {});
  check(5, 0, 1, {});
  Graph g;
  EXPECT_THROW(arange(g, 0, 5, 0), Error);
}

TEST(CreationArange, FloatRanges) {
  Out f = make([](Graph& g) { return arange(g, 0, 5, 2, F32); });
  EXPECT_EQ(f.dtype, F32);
  expect_exact(f, {0, 2, 4});
  Out h = make([](Graph& g) { return arange(g, -3, 3, 2, F16); });
  EXPECT_EQ(h.dtype, F16);
  expect_exact(h, {-3, -1, 1});
  Out n = make([](Graph& g) { return arange(g, 10, 0, -3, BF16); });
  EXPECT_EQ(n.dtype, BF16);
  expect_exact(n, {10, 7, 4, 1});
}

TEST(CreationArange, SymbolicBounds) {
  Expr s = Expr::var("s");
  for (int64_t v : {0, 1, 5, 6, 7}) {
    Out o = make([&](Graph& g) { return arange(g, 0, s); }, {{"s", v}});
    std::vector<double> want;
    for (int64_t i = 0; i < v; ++i) want.push_back(static_cast<double>(i));
    EXPECT_EQ(o.shape, std::vector<int64_t>{v});
    expect_exact(o, want, "arange(0, s) with s = " + std::to_string(v));
    Out odd = make([&](Graph& g) { return arange(g, 1, s, 2); }, {{"s", v}});
    want.clear();
    for (int64_t i = 1; i < v; i += 2) want.push_back(static_cast<double>(i));
    expect_exact(odd, want, "arange(1, s, 2) with s = " + std::to_string(v));
  }
  Out shifted = make([&](Graph& g) { return arange(g, s, s + 3, 1, F32); }, {{"s", 10}});
  EXPECT_EQ(shifted.dtype, F32);
  expect_exact(shifted, {10, 11, 12});
}

TEST(CreationIota, ExpressionOfTheIndex) {
  Expr z = Expr::index();
  Out a = make([&](Graph& g) { return iota(g, z * 3 + 1, 4); });
  EXPECT_EQ(a.dtype, I32);
  expect_exact(a, {1, 4, 7, 10});
  expect_exact(make([&](Graph& g) { return iota(g, z % 3, 7); }), {0, 1, 2, 0, 1, 2, 0});
  expect_exact(make([&](Graph& g) { return iota(g, (z * 7) / 2, 5); }), {0, 3, 7, 10, 14});
  expect_exact(make([&](Graph& g) { return iota(g, 5 - z, 4); }), {5, 4, 3, 2});
  Expr s = Expr::var("s");
  Out d = make([&](Graph& g) { return iota(g, z * s, s - 1); }, {{"s", 4}});
  EXPECT_EQ(d.shape, std::vector<int64_t>{3});
  expect_exact(d, {0, 4, 8});
}

// ---- triangular masks and tril/triu -----------------------------------------------------------

std::vector<double> band(int64_t n, int64_t m, int64_t k, bool lower) {
  std::vector<double> r;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) r.push_back(lower ? (j <= i + k) : (j >= i + k));
  return r;
}

TEST(CreationMask, TrilTriuMasks) {
  struct Case {
    int64_t n, m, k;
  };
  for (Case c : std::vector<Case>{{3, 3, 0}, {3, 3, 1}, {3, 3, -1}, {2, 4, 0}, {2, 4, 1}, {2, 4, -1}, {2, 4, 2},
                                  {4, 2, 0}, {4, 2, -2}, {3, 3, 5}, {3, 3, -5}, {1, 1, 0}}) {
    std::string what = "(" + std::to_string(c.n) + ", " + std::to_string(c.m) + ", k=" + std::to_string(c.k) + ")";
    Out l = make([&](Graph& g) { return tril_mask(g, c.n, c.m, c.k); });
    EXPECT_EQ(l.dtype, BOOL);
    EXPECT_EQ(l.shape, (std::vector<int64_t>{c.n, c.m}));
    expect_exact(l, band(c.n, c.m, c.k, true), "tril_mask" + what);
    Out u = make([&](Graph& g) { return triu_mask(g, c.n, c.m, c.k); });
    EXPECT_EQ(u.dtype, BOOL);
    expect_exact(u, band(c.n, c.m, c.k, false), "triu_mask" + what);
  }
  Expr n = Expr::var("n");
  Out d = make([&](Graph& g) { return tril_mask(g, n, n); }, {{"n", 4}});
  EXPECT_EQ(d.shape, (std::vector<int64_t>{4, 4}));
  expect_exact(d, band(4, 4, 0, true), "tril_mask(n, n), n = 4");
}

TEST(CreationMask, TrilTriuOfTensor) {
  // [3,4] f32 with infinities and NaN: kept elements are exact, the rest are 0.
  std::vector<double> xs = {1, kInf, 3, 4, -kInf, 6, kNaN, 8, 9, 10, 11, kNaN};
  for (int64_t k : {0, 1, -1}) {
    for (bool lower : {true, false}) {
      Graph g;
      Tensor x = input(g, "x", F32, {3, 4});
      Out o = run_graph(g, lower ? tril(x, k) : triu(x, k), {{"x", make_buffer(F32, xs, {3, 4})}});
      std::vector<double> keep = band(3, 4, k, lower), want;
      for (size_t i = 0; i < xs.size(); ++i) want.push_back(keep[i] ? xs[i] : 0.0);
      expect_exact(o, want, std::string(lower ? "tril" : "triu") + " k=" + std::to_string(k));
    }
  }
  // Batched i32 [2,3,3]: the mask applies to the last two dims of each batch.
  Graph g;
  Tensor x = input(g, "x", I32, {2, 3, 3});
  std::vector<int32_t> v(18);
  for (int i = 0; i < 18; ++i) v[i] = 16777217 + i;
  Out o = run_graph(g, triu(x, 1), {{"x", Buffer::i32(v, {2, 3, 3})}});
  EXPECT_EQ(o.dtype, I32);
  std::vector<double> keep = band(3, 3, 1, false), want;
  for (int i = 0; i < 18; ++i) want.push_back(keep[i % 9] ? v[i] : 0);
  expect_exact(o, want, "batched triu");
}

// ---- cast -------------------------------------------------------------------------------------

// The value v (already held in some dtype) converted to dtype `to`: floats round to nearest even,
// i32 truncates toward zero and saturates (NaN -> 0), bool is v != 0 (NaN -> true).
double ref_convert(double v, DType to) {
  switch (to) {
    case DType::I32:
      if (std::isnan(v)) return 0;
      return std::clamp(std::trunc(v), -2147483648.0, 2147483647.0);
    case DType::Bool: return v != 0 ? 1 : 0;
    default: return round_to_dtype(v, to);
  }
}

TEST(CreationCast, EveryDtypePair) {
  const std::vector<double> values = {-3e9, -70000, -2.75, -1, -0.5, -0.0, 0, 0.3, 1, 1.5, 2.5, 255.9,
                                      2049, 2051, 65519, 16777217, 3e9, 1e-6, 1e-40, kInf, -kInf, kNaN};
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      std::vector<double> src;  // what the input holds in `from`
      for (double v : values) src.push_back(ref_convert(v, from));
      Out o = run_unary(from, values, [to](const Tensor& t) { return cast(t, to); });
      std::string what = std::string("cast ") + dtype_name(from) + " -> " + dtype_name(to);
      EXPECT_EQ(o.dtype, to) << what;
      std::vector<double> want;
      for (double s : src) want.push_back(ref_convert(s, to));
      expect_values(o.v, want, exact(), src, what);
    }
  }
}

TEST(CreationCast, HandValues) {
  expect_exact(run_unary(F32, {-2.75, 2.75, -0.5, 3e9, kNaN}, [](const Tensor& t) { return cast(t, I32); }),
               {-2, 2, 0, 2147483647, 0});
  expect_exact(run_unary(F32, {0, -0.0, 0.25, kNaN, -kInf}, [](const Tensor& t) { return cast(t, BOOL); }),
               {0, 0, 1, 1, 1});
  expect_exact(run_unary(I32, {2049, 2051, 16777217}, [](const Tensor& t) { return cast(t, F16); }),
               {2048, 2052, kInf});
  expect_exact(run_unary(I32, {16777217, 257}, [](const Tensor& t) { return cast(t, BF16); }), {16777216, 256});
  expect_exact(run_unary(BOOL, {0, 1}, [](const Tensor& t) { return cast(t, I32); }), {0, 1});
  expect_exact(run_unary(F16, {65504, -0.125}, [](const Tensor& t) { return cast(t, BF16); }), {65536, -0.125});
}

// ---- contiguous -------------------------------------------------------------------------------

TEST(CreationContiguous, MaterialisesViewsExactly) {
  {
    Graph g;
    Tensor x = input(g, "x", F32, {2, 3});
    Out o = run_graph(g, contiguous(x.transpose(0, 1)),
                      {{"x", make_buffer(F32, {1, -0.0, kNaN, kInf, -kInf, 3.4e38}, {2, 3})}});
    EXPECT_EQ(o.shape, (std::vector<int64_t>{3, 2}));
    expect_exact(o, {1, kInf, -0.0, -kInf, kNaN, 3.4e38f});
    EXPECT_TRUE(std::signbit(o.v[2])) << "contiguous must keep -0";
  }
  for (DType dt : kAllDtypes) {
    Graph g;
    Tensor x = input(g, "x", dt, {3});
    std::vector<double> v = {dt == BOOL ? 1.0 : 16777217.0, 0, dt == BOOL ? 1.0 : -2.5};
    Tensor view = x.unsqueeze(0).expand({2, 3}).slice(1, 0, 3, 2);  // [2,2]: x[0], x[2] twice
    Out o = run_graph(g, contiguous(view), {{"x", make_buffer(dt, v, {3})}});
    EXPECT_EQ(o.dtype, dt);
    EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 2}));
    double a = ref_convert(v[0], dt), c = ref_convert(v[2], dt);
    expect_exact(o, {a, c, a, c}, std::string("contiguous ") + dtype_name(dt));
  }
}

}  // namespace
}  // namespace luminal
