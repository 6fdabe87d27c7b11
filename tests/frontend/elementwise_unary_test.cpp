// Unary elementwise ops on f32 against std:: math in double, including signed infinities, NaN,
// zeros and large magnitudes. Tolerances are in f32 ulps of the exact result unless noted.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

#define FN(op) [](const Tensor& t) { return op(t); }

const double kLog2E = 1.4426950408889634;

// exp(x) is built as exp2(x * log2(e)) in f32: rounding the product leaves an absolute error of
// up to |x*log2e| * 2^-24 in the exponent, i.e. a relative error growing with |x| (about 1.2 ulp
// per unit of |x|); plus the final rounding.
Tol exp_tol(double x) { return ulps(2 + 1.5 * std::fabs(x)); }

void check_unary_var(const UnaryFn& f, const RefFn& ref, const std::vector<double>& xs,
                     const std::function<Tol(double)>& tol, const std::string& what = "") {
  Out o = run_unary(DType::F32, xs, f);
  ASSERT_EQ(o.v.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = static_cast<float>(xs[i]);
    expect_values({o.v[i]}, {round_to_dtype(ref(x), DType::F32)}, tol(x), {x}, what);
  }
}

TEST(ElementwiseUnary, Exp) {
  check_unary_var(FN(exp), [](double x) { return std::exp(x); },
                  {-kInf, -200, -100, -20, -3.5, -1, -1e-3, -0.0, 0, 1e-6, 0.5, 1, 2.5, 10, 20, 88, 89, 1e30, kInf, kNaN},
                  exp_tol);
}

TEST(ElementwiseUnary, Exp2) {
  check_unary_f32(FN(exp2), [](double x) { return std::exp2(x); },
                  {-kInf, -150, -126, -3.5, -1, -1e-7, 0, 0.5, 1, 10, 127, 128, 1e30, kInf, kNaN}, ulps(1));
}

TEST(ElementwiseUnary, Log2) {
  check_unary_f32(FN(log2), [](double x) { return std::log2(x); },
                  {-kInf, -1, -0.0, 0, 1e-40, 1e-30, 1e-3, 0.5, 1, 1.0000001, 2, 10, 1024, 1e30, kInf, kNaN}, ulps(1));
}

TEST(ElementwiseUnary, Log) {
  // log2(x) * ln2: two roundings.
  check_unary_f32(FN(log), [](double x) { return std::log(x); },
                  {-kInf, -1, -0.0, 0, 1e-30, 1e-3, 0.5, 0.9, 1, 1.1, 2, 10, 1e30, kInf, kNaN}, ulps(2));
}

TEST(ElementwiseUnary, Log1p) {
  check_unary_f32(FN(log1p), [](double x) { return std::log1p(x); },
                  {-2, -1, -0.999, -0.5, -1e-3, -1e-7, 0, 1e-10, 1e-7, 1e-5, 1e-3, 0.5, 1, 10, 1e10, 1e30, kInf, kNaN},
                  ulps(4));
}

// log1p of values whose product log(1+x) * x overflows f32 (x > ~3.9e36).
TEST(ElementwiseUnary, Log1pHuge) {
  check_unary_f32(FN(log1p), [](double x) { return std::log1p(x); }, {1e37, 1e38, 3e38}, ulps(4));
}

TEST(ElementwiseUnary, Expm1) {
  // Away from 0 expm1 is exp(x) - 1, so it inherits exp's |x|-proportional error.
  check_unary_var(FN(expm1), [](double x) { return std::expm1(x); },
                  {-kInf, -100, -10, -1, -0.5, 0.5, 1, 10, 88, kInf, kNaN}, exp_tol);
}

// Near 0 (the reason expm1 exists) the result must keep its relative accuracy.
TEST(ElementwiseUnary, Expm1NearZero) {
  check_unary_f32(FN(expm1), [](double x) { return std::expm1(x); },
                  {-0.1, -1e-3, -1e-4, -1e-6, -0.0, 0, 1e-8, 1e-6, 1e-5, 2e-5, 1e-4, 1e-3, 0.01, 0.1}, ulps(8));
}

TEST(ElementwiseUnary, Sin) {
  check_unary_f32(FN(sin), [](double x) { return std::sin(x); },
                  {-kInf, -1e30, -100, -3.1415927, -1, -1e-3, -0.0, 0, 1e-6, 0.5, 1, 1.5707964, 3, 100, 1e30, kInf, kNaN},
                  ulps(1));
}

TEST(ElementwiseUnary, Cos) {
  // cos(x) = sin(x + pi/2) in f32: rounding x + pi/2 costs up to half an ulp of |x| + pi/2 in
  // absolute terms (~5e-7 for |x| <= 10), so the tolerance is absolute there.
  check_unary_f32(FN(cos), [](double x) { return std::cos(x); },
                  {-10, -3, -1.5, -1, -0.25, -1e-3, 0, 1e-6, 0.5, 1, 2, 3.1415927, 10, kInf, -kInf, kNaN},
                  Tol{2, 1e-6, DType::F32});
}

// cos of large arguments: x + pi/2 rounds away everything below ulp(x)/2, so this needs a real
// range reduction (std::cos is accurate there).
TEST(ElementwiseUnary, CosLargeArguments) {
  check_unary_f32(FN(cos), [](double x) { return std::cos(x); }, {1000, -12345, 1e6, 16777216, 1e30}, Tol{2, 1e-6, DType::F32});
}

TEST(ElementwiseUnary, Tan) {
  // sin(x)/cos(x): cos carries the absolute error above (~1.5e-7 for |x| < 2), which is relative
  // error 1.5e-7/|cos x| in the quotient: up to ~2e-6 at x = 1.4.
  check_unary_var(FN(tan), [](double x) { return std::tan(x); },
                  {-1.4, -1, -0.5, -1e-3, 0, 1e-6, 0.5, 1, 1.4, 3, kInf, kNaN},
                  [](double x) { return Tol{4 + 2e-7 / std::fabs(std::cos(x)) / 6e-8, 0, DType::F32}; });
}

TEST(ElementwiseUnary, SqrtRsqrtReciprocal) {
  std::vector<double> xs = {-kInf, -1, -0.0, 0, 1e-40, 1e-30, 0.25, 2, 3, 1e30, kInf, kNaN};
  check_unary_f32(FN(sqrt), [](double x) { return std::sqrt(x); }, xs, ulps(0.5), "sqrt");
  // 1/sqrt(x): two roundings.
  check_unary_f32(FN(rsqrt), [](double x) { return 1 / std::sqrt(x); }, xs, ulps(1.5), "rsqrt");
  check_unary_f32(FN(reciprocal), [](double x) { return 1 / x; }, {-kInf, -3, -0.0, 0, 3, 7, 1e30, kInf, kNaN},
                  ulps(0.5), "reciprocal");
}

const std::vector<double> kSpecial = {-kInf, -1e30, -3e9, -2.5, -1, -1e-30, 0, 1e-30, 0.5, 1, 3e9, 1e30, kInf, kNaN};

TEST(ElementwiseUnary, NegAbsSign) {
  check_unary_f32(FN(neg), [](double x) { return -x; }, kSpecial, exact(), "neg");
  check_unary_f32(FN(abs), [](double x) { return std::fabs(x); }, kSpecial, exact(), "abs");
  check_unary_f32(FN(sign), [](double x) { return std::isnan(x) ? x : (x > 0) - (x < 0); }, kSpecial, exact(), "sign");
}

const std::vector<double> kRounding = {-kInf, -1e30, -3e9, -8388609, -2.5, -1.5, -1, -0.7, -0.5, -0.3, 0, 0.3,
                                       0.49999997, 0.5, 0.7, 1, 1.5, 2.5, 3.5, 4.5, 8388607.5, 16777215, 3e9, 1e30,
                                       kInf, kNaN};

TEST(ElementwiseUnary, FloorCeilTrunc) {
  check_unary_f32(FN(floor), [](double x) { return std::floor(x); }, kRounding, exact(), "floor");
  check_unary_f32(FN(ceil), [](double x) { return std::ceil(x); }, kRounding, exact(), "ceil");
  check_unary_f32(FN(trunc), [](double x) { return std::trunc(x); }, kRounding, exact(), "trunc");
}

TEST(ElementwiseUnary, RoundHalfToEven) {
  check_unary_f32(FN(round), [](double x) { return std::nearbyint(x); }, kRounding, exact());
  Out o = run_unary(DType::F32, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5}, FN(round));
  expect_exact(o, {0, 2, 2, -0.0, -2, -2});
}

// Results that are zero must carry the sign std:: gives them (torch matches).
TEST(ElementwiseUnary, SignedZeroResults) {
  struct Case {
    const char* name;
    UnaryFn f;
    double x;
    double want;
  };
  std::vector<Case> cases = {
      {"neg(0)", FN(neg), 0.0, -0.0},        {"abs(-0)", FN(abs), -0.0, 0.0},
      {"trunc(-0.5)", FN(trunc), -0.5, -0.0}, {"floor(-0)", FN(floor), -0.0, -0.0},
      {"ceil(-0.5)", FN(ceil), -0.5, -0.0},   {"round(-0.5)", FN(round), -0.5, -0.0},
      {"round(-0.3)", FN(round), -0.3, -0.0}, {"sqrt(-0)", FN(sqrt), -0.0, -0.0},
  };
  for (const Case& c : cases) {
    Out o = run_unary(DType::F32, {c.x}, c.f);
    EXPECT_EQ(o.v[0], 0.0) << c.name;
    EXPECT_EQ(std::signbit(o.v[0]), std::signbit(c.want)) << c.name << ": got " << fmt(o.v[0]) << ", want " << fmt(c.want);
  }
}

TEST(ElementwiseUnary, ReluLeakyRelu) {
  std::vector<double> xs = {-kInf, -1e30, -3, -1e-30, 0, 1e-30, 2, 1e30, kInf, kNaN};
  check_unary_f32(FN(relu), [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); }, xs, exact(), "relu");
  check_unary_f32([](const Tensor& t) { return leaky_relu(t); },
                  [](double x) { return x > 0 ? x : x * 0.01; }, xs, ulps(1), "leaky_relu(0.01)");
  check_unary_f32([](const Tensor& t) { return leaky_relu(t, 0.2); },
                  [](double x) { return x > 0 ? x : x * 0.2; }, xs, ulps(1), "leaky_relu(0.2)");
}

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(ElementwiseUnary, SigmoidSilu) {
  std::vector<double> xs = {-kInf, -100, -20, -5, -1, -1e-3, 0, 1e-3, 1, 5, 20, 100, kInf, kNaN};
  // exp(-x) carries exp's |x|-proportional error (see exp_tol), then 1/(e+1) rounds twice more.
  check_unary_var(FN(sigmoid), ref_sigmoid, xs, [](double x) { return ulps(4 + 1.5 * std::fabs(x)); }, "sigmoid");
  // silu(-inf) is -inf * 0 (NaN) in torch too; left out.
  std::vector<double> ys(xs.begin() + 1, xs.end());
  check_unary_var(FN(silu), [](double x) { return x * ref_sigmoid(x); }, ys,
                  [](double x) { return Tol{5 + 1.5 * std::fabs(x), 1e-40, DType::F32}; }, "silu");
}

TEST(ElementwiseUnary, Tanh) {
  // Built from exp(-2|x|): exp's error at 2|x| (see exp_tol) is damped by (1-e)/(1+e).
  check_unary_var(FN(tanh), [](double x) { return std::tanh(x); },
                  {-kInf, -100, -10, -3, -1, -0.5, 0, 0.5, 1, 3, 10, 100, 1e30, kInf, kNaN},
                  [](double x) { return ulps(4 + 3 * std::fabs(x)); });
}

// tanh keeps relative accuracy near 0, where it is ~x.
TEST(ElementwiseUnary, TanhNearZero) {
  check_unary_f32(FN(tanh), [](double x) { return std::tanh(x); },
                  {-0.1, -1e-3, -1e-4, -1e-6, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1}, ulps(8));
}

// erf uses Abramowitz & Stegun 7.1.26, documented with a maximum absolute error of 1.5e-7; the
// final 1 - poly*exp(-x^2) adds up to half an ulp of 1 (6e-8). Hence an absolute tolerance.
const double kErfAbs = 2.5e-7;

TEST(ElementwiseUnary, Erf) {
  check_unary_f32(FN(erf), [](double x) { return std::erf(x); },
                  {-kInf, -1e30, -10, -3, -1.5, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 2, 3, 10, 1e30, kInf, kNaN},
                  Tol{2, kErfAbs, DType::F32});
}

TEST(ElementwiseUnary, GeluErfForm) {
  // gelu = x/2 * (1 + erf(x/sqrt2)): erf's absolute error is scaled by |x|/2.
  check_unary_var(FN(gelu), [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
                  {-10, -5, -3, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 5, 10, 1e30, kInf, kNaN},
                  [](double x) { return Tol{4, kErfAbs * std::max(1.0, std::fabs(x)) * 0.5, DType::F32}; });
}

TEST(ElementwiseUnary, GeluTanhForm) {
  const double c = std::sqrt(2 / M_PI);
  // tanh's error (see the Tanh test) on the inner value, scaled by |x|/2.
  check_unary_var(FN(gelu_tanh), [c](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); },
                  {-10, -5, -3, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 5, 10, kInf, kNaN},
                  [](double x) { return Tol{8, 3e-7 * std::max(1.0, std::fabs(x)), DType::F32}; });
}

double ref_softplus(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

TEST(ElementwiseUnary, Softplus) {
  std::vector<double> xs = {-kInf, -100, -20, -5, -1, -1e-3, 0, 1e-3, 1, 5, 19.5, 20, 20.5, 30, 1e30, kInf, kNaN};
  // log1p(exp(x)): exp's |x|-proportional relative error carries through (damped by log1p).
  auto tol = [](double x) { return Tol{4 + 1.5 * std::fabs(x), 1e-44, DType::F32}; };
  check_unary_var(FN(softplus), [](double x) { return ref_softplus(x, 1, 20); }, xs, tol, "softplus");
  // beta = 2, threshold = 5: x > 2.5 passes through.
  check_unary_var([](const Tensor& t) { return softplus(t, 2.0, 5.0); },
                  [](double x) { return ref_softplus(x, 2, 5); }, {-3, -1, 0, 1, 2.4, 2.6, 10, kInf}, tol,
                  "softplus(beta=2, threshold=5)");
  // Just above the threshold the identity is used, just below the formula (values differ in the
  // 9th digit only, so check the identity exactly).
  Out o = run_unary(DType::F32, {20.5, 25}, FN(softplus));
  expect_exact(o, {20.5, 25});
}

TEST(ElementwiseUnary, IsnanIsinf) {
  std::vector<double> xs = {-kInf, -1e30, -1, -0.0, 0, 1, 3.4e38, kInf, kNaN, -kNaN};
  Out n = run_unary(DType::F32, xs, FN(isnan));
  EXPECT_EQ(n.dtype, DType::Bool);
  expect_exact(n, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, "isnan");
  Out i = run_unary(DType::F32, xs, FN(isinf));
  EXPECT_EQ(i.dtype, DType::Bool);
  expect_exact(i, {1, 0, 0, 0, 0, 0, 0, 1, 0, 0}, "isinf");
}

}  // namespace
}  // namespace luminal
