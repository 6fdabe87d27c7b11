// Binary arithmetic: broadcasting, tensor-scalar forms, division family, pow, min/max, clamp and
// dtype promotion. References are hand values or double math on the exact inputs.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

#define BFN(op) [](const Tensor& a, const Tensor& b) { return op(a, b); }

const DType F32 = DType::F32, I32 = DType::I32, F16 = DType::F16, BF16 = DType::BF16, BOOL = DType::Bool;

// Naive same-shape reference on the f32 inputs: want[i] = f(a[i], b[i]) rounded to f32.
std::vector<double> zip(const std::vector<double>& a, const std::vector<double>& b, double (*f)(double, double)) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i)
    r.push_back(round_to_dtype(f(static_cast<float>(a[i]), static_cast<float>(b[i])), F32));
  return r;
}

// ---- broadcasting -----------------------------------------------------------------------------

TEST(ElementwiseBroadcast, RowVectorAgainstMatrix) {
  Out o = run_binary(F32, {1, 2, 3, 4, 5, 6}, {2, 3}, F32, {10, 20, 30}, {3}, BFN(add));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {11, 22, 33, 14, 25, 36});
  // Operand order does not matter for the shape; sub checks which side is which.
  Out s = run_binary(F32, {10, 20, 30}, {3}, F32, {1, 2, 3, 4, 5, 6}, {2, 3}, BFN(sub));
  EXPECT_EQ(s.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(s, {9, 18, 27, 6, 15, 24});
}

TEST(ElementwiseBroadcast, ColumnAgainstRow) {
  Out o = run_binary(F32, {1, 2}, {2, 1}, F32, {10, 20, 30}, {1, 3}, BFN(mul));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {10, 20, 30, 20, 40, 60});
  Out d = run_binary(F32, {1, 2}, {2, 1}, F32, {10, 20, 30}, {1, 3}, BFN(sub));
  expect_exact(d, {-9, -19, -29, -8, -18, -28});
}

TEST(ElementwiseBroadcast, RankZeroScalarInput) {
  Out o = run_binary(F32, {1.5}, {}, F32, {1, 2, 3, 4, 5, 6}, {2, 3}, BFN(sub));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {0.5, -0.5, -1.5, -2.5, -3.5, -4.5});
  Out p = run_binary(F32, {1, 2, 3, 4, 5, 6}, {2, 3}, F32, {2}, {}, BFN(mul));
  expect_exact(p, {2, 4, 6, 8, 10, 12});
  Out s = run_binary(F32, {3}, {}, F32, {4}, {}, BFN(add));
  EXPECT_EQ(s.shape, std::vector<int64_t>{});
  expect_exact(s, {7});
}

TEST(ElementwiseBroadcast, ThreeDimensions) {
  // [2,1,3] + [4,1] -> [2,4,3]; naive reference.
  std::vector<double> a(6), b(4);
  for (int i = 0; i < 6; ++i) a[i] = i * 100;
  for (int i = 0; i < 4; ++i) b[i] = i;
  Out o = run_binary(F32, a, {2, 1, 3}, F32, b, {4, 1}, BFN(add));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 4, 3}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(a[i * 3 + k] + b[j]);
  expect_exact(o, want);
}

// ---- arithmetic -------------------------------------------------------------------------------

const std::vector<double> kA = {1.5, -2.25, 1e30, -1e30, 3.4e38, kInf, kInf, -kInf, kNaN, 0, 7, 1e-30};
const std::vector<double> kB = {0.25, 4, 1e30, 3, 3.4e38, -kInf, 1, 2, 1, -0.0, 0.1, 1e-30};

TEST(ElementwiseBinary, AddSubMulAreCorrectlyRounded) {
  expect_values(run_binary(F32, kA, F32, kB, BFN(add)).v, zip(kA, kB, [](double a, double b) { return a + b; }),
                exact(), kA, "add");
  expect_values(run_binary(F32, kA, F32, kB, BFN(sub)).v, zip(kA, kB, [](double a, double b) { return a - b; }),
                exact(), kA, "sub");
  expect_values(run_binary(F32, kA, F32, kB, BFN(mul)).v, zip(kA, kB, [](double a, double b) { return a * b; }),
                exact(), kA, "mul");
}

TEST(ElementwiseBinary, TrueDivision) {
  std::vector<double> a = {1, -7, 10, 1e30, 1, -1, 0, kInf, 5, 1e-30, 3};
  std::vector<double> b = {3, 2, 0.1, 1e-5, 0, -0.0, 0, 2, kInf, 1e30, -7};
  // Computed as a * (1/b) in f32: two roundings, so within 1.5 ulp (the exact-quotient test
  // below checks the cases where that matters).
  expect_values(run_binary(F32, a, F32, b, BFN(div)).v, zip(a, b, [](double x, double y) { return x / y; }),
                Tol{1.5, 1e-44, F32}, a, "div f32");
  // i32 / i32 is true division giving f32.
  Out o = run_binary(I32, {7, -7, 1, 6}, I32, {2, 2, 4, 3}, BFN(div));
  EXPECT_EQ(o.dtype, F32);
  expect_exact(o, {3.5, -3.5, 0.25, 2});
}

// div is a * (1/b) in f32 (docs/frontend.md): within 1 ulp of IEEE division, not always exact
// even when the quotient is representable (41/41 gives 0.99999994).
TEST(ElementwiseBinary, DivisionIsWithinOneUlp) {
  std::vector<double> a = {21, 41, 49, 164, 91, 1, 1e30}, b = {7, 41, 7, 41, 13, 3, 7e-3};
  std::vector<double> want;
  for (size_t k = 0; k < a.size(); ++k) want.push_back(static_cast<double>(static_cast<float>(a[k]) / static_cast<float>(b[k])));
  Out i = run_binary(I32, {21, 41, 49, 164, 91}, I32, {7, 41, 7, 41, 13}, BFN(div));
  expect_values(i.v, {3, 1, 7, 4, 7}, ulps(1), {21, 41, 49, 164, 91}, "i32 div");
  Out f = run_binary(F32, a, F32, b, BFN(div));
  expect_values(f.v, want, ulps(1), a, "f32 div");
}

TEST(ElementwiseBinary, FloorDivide) {
  std::vector<double> a = {7, -7, 7, -7, 6, 0, 9}, b = {2, 2, -2, -2, 3, 5, -3};
  Out i = run_binary(I32, a, I32, b, BFN(floor_divide));
  EXPECT_EQ(i.dtype, I32);
  expect_exact(i, {3, -4, -4, 3, 2, 0, -3});
  std::vector<double> fa = {7.5, -7.5, 7, -0.5, 5, 1e30}, fb = {2, 2, -2, 3, kInf, 3e29};
  Out f = run_binary(F32, fa, F32, fb, BFN(floor_divide));
  EXPECT_EQ(f.dtype, F32);
  expect_values(f.v, {3, -4, -4, -1, 0, 3}, exact(), fa, "f32 floor_divide");
}

// floor(a / b) must use the exact quotient: 41 // 41 is 1, and large i32 values keep all bits.
TEST(ElementwiseBinary, FloorDivideExactness) {
  std::vector<double> a = {41, 164, 287, 16777217, 2000000001}, b = {41, 41, 41, 1, 1};
  Out i = run_binary(I32, a, I32, b, BFN(floor_divide));
  expect_values(i.v, {1, 4, 7, 16777217, 2000000001}, exact(), a, "i32 floor_divide");
  // Python, numpy and torch: 1.0 // 0.1 == 9.0 (0.1f is slightly above 0.1).
  Out f = run_binary(F32, {1.0, 41}, F32, {0.1, 41}, BFN(floor_divide));
  expect_values(f.v, {9, 1}, exact(), {1.0, 41}, "f32 floor_divide");
}

double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}

TEST(ElementwiseBinary, ModTakesDivisorSign) {
  std::vector<double> a = {-7, 7, -7, 7, 6, 0, -1}, b = {3, 3, -3, -3, 3, 5, 5};
  Out i = run_binary(I32, a, I32, b, BFN(mod));
  EXPECT_EQ(i.dtype, I32);
  expect_exact(i, {2, 1, -1, -2, 0, 0, 4});
  std::vector<double> fa = {-7, 7, -7.5, 7.5, 5.5, -5.5, kInf, 5, 1e30, -0.25};
  std::vector<double> fb = {3, -3, 2, -2, kInf, kInf, 3, 0, 7, 1};
  Out f = run_binary(F32, fa, F32, fb, BFN(mod));
  expect_values(f.v, zip(fa, fb, py_mod), exact(), fa, "f32 mod");
  expect_values(f.v, {2, -2, 0.5, -0.5, 5.5, kInf, kNaN, kNaN, py_mod(1e30f, 7), 0.75}, exact(), fa, "f32 mod (hand)");
}

TEST(ElementwiseBinary, FmodTakesDividendSign) {
  Out i = run_binary(I32, {-7, 7, -7, 7, 6}, I32, {3, -3, -3, 3, 3}, BFN(fmod));
  expect_exact(i, {-1, 1, -1, 1, 0});
  std::vector<double> fa = {-7.5, 7.5, 5, -5, kInf, 1, 1e30}, fb = {2, -2, kInf, kInf, 2, 0, 7};
  Out f = run_binary(F32, fa, F32, fb, BFN(fmod));
  expect_values(f.v, zip(fa, fb, [](double a, double b) { return std::fmod(a, b); }), exact(), fa, "f32 fmod");
}

// ---- pow --------------------------------------------------------------------------------------

TEST(ElementwisePow, TensorExponent) {
  std::vector<double> a = {2, -2, -2, -3, -8, 0, 0, 0, 3, 1.5, 4, kNaN, -3, 10, 2};
  std::vector<double> b = {10, 3, 2, 3, 1.0 / 3, 0, 2, -1, 0.5, 2.5, -0.5, 0, 2.5, -2, 0.5};
  Out o = run_binary(F32, a, F32, b, BFN(pow));
  ASSERT_EQ(o.v.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    double want = round_to_dtype(std::pow(x, y), F32);
    // exp2(y * log2|x|): the rounding of the product is amplified like exp's (see the unary
    // tests): about 1.2 ulp per unit of |y log2 x|.
    double t = (x == 0 || std::isnan(x)) ? 0 : std::fabs(y * std::log2(std::fabs(x)));
    expect_values({o.v[i]}, {want}, ulps(2 + 1.5 * t), {x}, "pow(" + fmt(x) + ", " + fmt(y) + ")");
  }
  // The hand values the reference stands for.
  EXPECT_TRUE(std::isnan(o.v[4]));  // (-8)^(1/3)
  EXPECT_EQ(o.v[5], 1);             // 0^0
  EXPECT_EQ(o.v[7], kInf);          // 0^-1
  EXPECT_EQ(o.v[11], 1);            // NaN^0
  EXPECT_TRUE(std::isnan(o.v[12])); // (-3)^2.5
  EXPECT_NEAR(o.v[1], -8, 1e-5);
  EXPECT_NEAR(o.v[3], -27, 1e-5);
}

// C99 Annex F / IEEE pow special cases (std::pow and torch.pow follow them).
TEST(ElementwisePow, IeeeSpecialCases) {
  std::vector<double> a = {1, 1, 1, -1, -1, -2, -0.5, -kInf, -kInf, 0.5, 2};
  std::vector<double> b = {kNaN, kInf, -kInf, kInf, -kInf, kInf, -kInf, 2.5, 3, kInf, -kInf};
  Out o = run_binary(F32, a, F32, b, BFN(pow));
  std::vector<double> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(std::pow(a[i], b[i]));
  expect_values(o.v, want, exact(), a, "pow");
}

TEST(ElementwisePow, ScalarExponents) {
  std::vector<double> xs = {-3, -1.5, -0.5, 0, 0.5, 2, 10, kInf, kNaN};
  for (double e : {2.0, 3.0, -1.0, 0.0}) {
    std::vector<double> ys = xs;
    ys.push_back(-kInf);
    Out o = run_unary(F32, ys, [e](const Tensor& t) { return pow(t, e); });
    std::vector<double> want;
    for (double x : ys) want.push_back(std::pow(x, e));
    // Integer exponents use repeated multiplication: one rounding per multiply.
    expect_values(o.v, want, ulps(1.5), ys, "pow(x, " + fmt(e) + ")");
  }
  // 0.5 is sqrt (so sqrt(-inf) = NaN, as torch); 2.5 uses the general path.
  Out s = run_unary(F32, xs, [](const Tensor& t) { return pow(t, 0.5); });
  std::vector<double> want_s, want_f;
  for (double x : xs) want_s.push_back(round_to_dtype(std::sqrt(x), F32));
  expect_values(s.v, want_s, ulps(0.5), xs, "pow(x, 0.5)");
  Out f = run_unary(F32, xs, [](const Tensor& t) { return pow(t, 2.5); });
  for (double x : xs) want_f.push_back(round_to_dtype(std::pow(x, 2.5), F32));
  expect_values(f.v, want_f, ulps(2 + 1.5 * 2.5 * std::log2(10)), xs, "pow(x, 2.5)");
}

TEST(ElementwisePow, IntegerBase) {
  // Integer exponents keep i32 exactly (and wrap like i32 multiplication); others give f32.
  Out sq = run_unary(I32, {-3, 0, 5, 46340, 65536}, [](const Tensor& t) { return pow(t, 2.0); });
  EXPECT_EQ(sq.dtype, I32);
  expect_exact(sq, {9, 0, 25, 2147395600, 0});
  Out cu = run_unary(I32, {-3, 1291}, [](const Tensor& t) { return pow(t, 3.0); });
  expect_exact(cu, {-27, 2151685171.0 - 4294967296.0});
  Out h = run_unary(I32, {4, 2}, [](const Tensor& t) { return pow(t, 0.5); });
  EXPECT_EQ(h.dtype, F32);
  expect_values(h.v, {2, std::sqrt(2.0)}, ulps(0.5));
  Out r = run_unary(I32, {4, -2}, [](const Tensor& t) { return pow(t, -1.0); });
  EXPECT_EQ(r.dtype, F32);
  expect_exact(r, {0.25, -0.5});
}

// ---- minimum / maximum / clamp ----------------------------------------------------------------

TEST(ElementwiseMinMax, FloatsPropagateNaN) {
  std::vector<double> a = {1, -1, kNaN, 2, -kInf, kInf, 1e30, kNaN}, b = {2, -3, 1, kNaN, 5, 5, -1e30, kNaN};
  expect_values(run_binary(F32, a, F32, b, BFN(maximum)).v, {2, -1, kNaN, kNaN, 5, kInf, 1e30f, kNaN}, exact(), a,
                "maximum");
  expect_values(run_binary(F32, a, F32, b, BFN(minimum)).v, {1, -3, kNaN, kNaN, -kInf, 5, -1e30f, kNaN}, exact(), a,
                "minimum");
}

TEST(ElementwiseMinMax, IntegersAndBools) {
  std::vector<double> a = {-2147483648.0, 5, -3, 2147483647}, b = {0, 5, 7, -1};
  Out mx = run_binary(I32, a, I32, b, BFN(maximum));
  EXPECT_EQ(mx.dtype, I32);
  expect_exact(mx, {0, 5, 7, 2147483647});
  Out mn = run_binary(I32, a, I32, b, BFN(minimum));
  expect_exact(mn, {-2147483648.0, 5, -3, -1});
  Out bmx = run_binary(BOOL, {0, 0, 1, 1}, BOOL, {0, 1, 0, 1}, BFN(maximum));
  EXPECT_EQ(bmx.dtype, BOOL);
  expect_exact(bmx, {0, 1, 1, 1});
  expect_exact(run_binary(BOOL, {0, 0, 1, 1}, BOOL, {0, 1, 0, 1}, BFN(minimum)), {0, 0, 0, 1});
  // Mixed: i32 with f32 promotes.
  Out m = run_binary(I32, {3, -4}, F32, {2.5, -3.5}, BFN(maximum));
  EXPECT_EQ(m.dtype, F32);
  expect_exact(m, {3, -3.5});
}

TEST(ElementwiseClamp, ScalarBounds) {
  std::vector<double> xs = {-5, -1, 0, 0.5, 3, 10, -kInf, kInf, kNaN};
  expect_exact(run_unary(F32, xs, [](const Tensor& t) { return clamp(t, -1.0, 2.0); }),
               {-1, -1, 0, 0.5, 2, 2, -1, 2, kNaN});
  expect_exact(run_unary(F32, xs, [](const Tensor& t) { return clamp(t, std::nullopt, 2.0); }),
               {-5, -1, 0, 0.5, 2, 2, -kInf, 2, kNaN});
  expect_exact(run_unary(F32, xs, [](const Tensor& t) { return clamp(t, 0.0, std::nullopt); }),
               {0, 0, 0, 0.5, 3, 10, 0, kInf, kNaN});
  Out i = run_unary(I32, {-5, 0, 7}, [](const Tensor& t) { return clamp(t, -2.0, 3.0); });
  EXPECT_EQ(i.dtype, I32);
  expect_exact(i, {-2, 0, 3});
  // A fractional bound on an integer tensor promotes to f32.
  Out f = run_unary(I32, {-5, 0, 7}, [](const Tensor& t) { return clamp(t, -2.5, 3.5); });
  EXPECT_EQ(f.dtype, F32);
  expect_exact(f, {-2.5, 0, 3.5});
}

TEST(ElementwiseClamp, TensorBoundsBroadcast) {
  Graph g;
  Tensor x = input(g, "x", F32, {2, 3});
  Tensor lo = input(g, "lo", F32, {3});
  Tensor hi = input(g, "hi", F32, {2, 1});
  Out o = run_graph(g, clamp(x, lo, hi),
                    {{"x", Buffer::f32({-9, 0, 9, -9, 0, 9}, {2, 3})},
                     {"lo", Buffer::f32({-1, -2, -3}, {3})},
                     {"hi", Buffer::f32({5, 1}, {2, 1})}});
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {-1, 0, 5, -1, 0, 1});
}

// ---- dtype promotion and tensor-scalar forms --------------------------------------------------

TEST(ElementwisePromotion, BinaryResultDtypes) {
  Out bi = run_binary(BOOL, {1, 0, 1}, I32, {5, -2, 2147483647}, BFN(add));
  EXPECT_EQ(bi.dtype, I32);
  expect_exact(bi, {6, -2, -2147483648.0});
  Out bb = run_binary(BOOL, {1, 1, 0}, BOOL, {1, 0, 0}, BFN(add));
  EXPECT_EQ(bb.dtype, BOOL);
  expect_exact(bb, {1, 1, 0});
  Out bm = run_binary(BOOL, {1, 1, 0}, BOOL, {1, 0, 0}, BFN(mul));
  expect_exact(bm, {1, 0, 0});
  Out fi = run_binary(I32, {16777217, -3}, F32, {0, 0.5}, BFN(add));
  EXPECT_EQ(fi.dtype, F32);
  expect_exact(fi, {16777216, -2.5});
  // f16 + bf16 -> f32, exactly: 1 + 2^-10 (f16) + 2^-8 (bf16).
  Out hb = run_binary(F16, {1.0009765625, -2}, BF16, {0.00390625, 0.5}, BFN(add));
  EXPECT_EQ(hb.dtype, F32);
  expect_exact(hb, {1.0048828125, -1.5});
  Out hh = run_binary(F16, {2048, 1}, F16, {1, 0.000244140625}, BFN(add));
  EXPECT_EQ(hh.dtype, F16);
  expect_exact(hh, {2048, 1});  // rounded to f16
  Out hf = run_binary(F16, {2048}, F32, {1}, BFN(add));
  EXPECT_EQ(hf.dtype, F32);
  expect_exact(hf, {2049});
}

TEST(ElementwisePromotion, I32ArithmeticWraps) {
  Out a = run_binary(I32, {2147483647, -2147483648.0, 65536, -2147483648.0}, I32, {1, 1, 65536, -1}, BFN(add));
  expect_exact(a, {-2147483648.0, -2147483647, 131072, 2147483647});
  Out s = run_binary(I32, {-2147483648.0, 2147483647}, I32, {1, -1}, BFN(sub));
  expect_exact(s, {2147483647, -2147483648.0});
  Out m = run_binary(I32, {65536, 46341, -2147483648.0}, I32, {65536, 46341, -1}, BFN(mul));
  expect_exact(m, {0, 2147488281.0 - 4294967296.0, -2147483648.0});
}

TEST(ElementwisePromotion, TensorScalarForms) {
  std::vector<double> xs = {-2, 0.5, 4};
  auto run = [&](std::function<Tensor(const Tensor&)> f) { return run_unary(F32, xs, f); };
  expect_exact(run([](const Tensor& t) { return t + 1.5; }), {-0.5, 2, 5.5});
  expect_exact(run([](const Tensor& t) { return 1.5 + t; }), {-0.5, 2, 5.5});
  expect_exact(run([](const Tensor& t) { return t - 1.5; }), {-3.5, -1, 2.5});
  expect_exact(run([](const Tensor& t) { return 1.5 - t; }), {3.5, 1, -2.5});
  expect_exact(run([](const Tensor& t) { return t * 3.0; }), {-6, 1.5, 12});
  expect_exact(run([](const Tensor& t) { return 3.0 * t; }), {-6, 1.5, 12});
  expect_exact(run([](const Tensor& t) { return t / 4.0; }), {-0.5, 0.125, 1});
  expect_exact(run([](const Tensor& t) { return 4.0 / t; }), {-2, 8, 1});
  expect_exact(run([](const Tensor& t) { return -t; }), {2, -0.5, -4});
  // Tensor-tensor operators.
  Out o = run_binary(F32, {1, 2}, F32, {4, 8}, [](const Tensor& a, const Tensor& b) { return (a + b) * a - b / a; });
  expect_exact(o, {1, 16});
}

TEST(ElementwisePromotion, IntegerTensorWithScalar) {
  auto run = [](std::function<Tensor(const Tensor&)> f) { return run_unary(I32, {1, -2, 2147483647}, f); };
  Out a = run([](const Tensor& t) { return t + 2.5; });
  EXPECT_EQ(a.dtype, F32);
  expect_exact(a, {3.5, 0.5, 2147483648.0});  // 2^31 - 1 becomes 2^31 in f32
  Out b = run([](const Tensor& t) { return t + 2.0; });
  EXPECT_EQ(b.dtype, I32);
  expect_exact(b, {3, 0, -2147483647});
  Out c = run([](const Tensor& t) { return t * 0.5; });
  EXPECT_EQ(c.dtype, F32);
  expect_exact(c, {0.5, -1, 1073741824});
  Out d = run([](const Tensor& t) { return 2.5 - t; });
  EXPECT_EQ(d.dtype, F32);
  expect_exact(d, {1.5, 4.5, -2147483648.0});
  Out e = run([](const Tensor& t) { return t / 2.0; });
  EXPECT_EQ(e.dtype, F32);
  expect_exact(e, {0.5, -1, 1073741824});
}

TEST(ElementwisePromotion, HalfTensorWithScalarRoundsOnce) {
  // 1000 + 0.3: f16 spacing at 1000 is 0.5. With the scalar kept unrounded the exact 1000.3 rounds
  // to 1000.5; the result stays f16.
  Out h = run_unary(F16, {1000, 1}, [](const Tensor& t) { return t + 0.3; });
  EXPECT_EQ(h.dtype, F16);
  expect_exact(h, {1000.5, round_to_dtype(1.3f, F16)});
  Out b = run_unary(BF16, {256, 3}, [](const Tensor& t) { return t * 1.01; });
  EXPECT_EQ(b.dtype, BF16);
  expect_exact(b, {round_to_dtype(256 * 1.01f, BF16), round_to_dtype(3 * 1.01f, BF16)});
}

}  // namespace
}  // namespace luminal
