// Unary ops on f16, bf16 and i32 inputs: float results keep the input's float dtype and are
// within 1 ulp (of that dtype) of the exact result rounded to the dtype; integer inputs give f32
// for math ops and stay i32 for the exact ones.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

struct UnaryCase {
  const char* name;
  UnaryFn f;
  RefFn ref;
};

#define CASE(op, ref_expr) UnaryCase{#op, [](const Tensor& t) { return op(t); }, [](double x) -> double { return ref_expr; }}

double sigm(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryCase> math_cases() {
  return {
      CASE(exp, std::exp(x)),
      CASE(log, std::log(x)),
      CASE(exp2, std::exp2(x)),
      CASE(log2, std::log2(x)),
      CASE(log1p, std::log1p(x)),
      CASE(expm1, std::expm1(x)),
      CASE(sin, std::sin(x)),
      CASE(cos, std::cos(x)),
      CASE(tan, std::tan(x)),
      CASE(sqrt, std::sqrt(x)),
      CASE(rsqrt, 1 / std::sqrt(x)),
      CASE(reciprocal, 1 / x),
      CASE(sigmoid, sigm(x)),
      CASE(silu, x * sigm(x)),
      CASE(tanh, std::tanh(x)),
      CASE(erf, std::erf(x)),
      CASE(gelu, 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))),
      CASE(gelu_tanh, 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))),
      CASE(softplus, x > 20 ? x : std::log1p(std::exp(x))),
      CASE(leaky_relu, x > 0 ? x : 0.01 * x),
  };
}

// Operations that are exact in any dtype (and keep integer dtypes).
std::vector<UnaryCase> exact_cases() {
  return {
      CASE(neg, -x),
      CASE(abs, std::fabs(x)),
      CASE(sign, std::isnan(x) ? x : (x > 0) - (x < 0)),
      CASE(floor, std::floor(x)),
      CASE(ceil, std::ceil(x)),
      CASE(round, std::nearbyint(x)),
      CASE(trunc, std::trunc(x)),
      CASE(relu, std::isnan(x) ? x : std::max(x, 0.0)),
  };
}

// Exactly representable in f16 and bf16 (at most 8 significant bits).
const std::vector<double> kLowpValues = {-kInf, -1000, -3.5, -2.5, -1.25, -0.5, -0.125, 0,
                                         0.25, 0.5, 0.75, 1.5, 2, 3.25, 12, 1000, kInf, kNaN};

class ElementwiseUnaryLowp : public ::testing::TestWithParam<DType> {};

TEST_P(ElementwiseUnaryLowp, MathMatchesRoundedReference) {
  DType dt = GetParam();
  std::vector<UnaryCase> cases = math_cases();
  for (const UnaryCase& c : exact_cases()) cases.push_back(c);
  for (const UnaryCase& c : cases) {
    Out o = run_unary(dt, kLowpValues, c.f);
    EXPECT_EQ(o.dtype, dt) << c.name;
    std::vector<double> want;
    for (double x : kLowpValues) want.push_back(round_to_dtype(c.ref(x), dt));
    if (std::string(c.name) == "silu" || std::string(c.name) == "gelu" || std::string(c.name) == "gelu_tanh") {
      // x * (something -> 0) at x = -inf is NaN in torch as well: skip that element.
      want[0] = o.v[0];
    }
    expect_values(o.v, want, ulps(1, dt), kLowpValues, std::string(c.name) + " on " + dtype_name(dt));
  }
}

TEST_P(ElementwiseUnaryLowp, IsnanIsinfGiveBool) {
  DType dt = GetParam();
  Out n = run_unary(dt, {-kInf, -1, 0, 65504, kInf, kNaN}, [](const Tensor& t) { return isnan(t); });
  EXPECT_EQ(n.dtype, DType::Bool);
  expect_exact(n, {0, 0, 0, 0, 0, 1});
  Out i = run_unary(dt, {-kInf, -1, 0, 65504, kInf, kNaN}, [](const Tensor& t) { return isinf(t); });
  EXPECT_EQ(i.dtype, DType::Bool);
  expect_exact(i, {1, 0, 0, 0, 1, 0});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ElementwiseUnaryLowp, ::testing::Values(DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

const std::vector<double> kIntValues = {-2147483647, -100, -3, -1, 0, 1, 2, 5, 16777217, 2147483647};

TEST(ElementwiseUnaryI32, MathOpsGiveF32) {
  const std::vector<double> xs = {-7, -3, -1, 0, 1, 2, 5, 9};
  for (const UnaryCase& c : math_cases()) {
    Out o = run_unary(DType::I32, xs, c.f);
    EXPECT_EQ(o.dtype, DType::F32) << c.name;
    // The math is f32 math on the converted integers, checked loosely here (the f32 tests check
    // accuracy op by op).
    std::vector<double> want;
    for (double x : xs) want.push_back(round_to_dtype(c.ref(x), DType::F32));
    expect_values(o.v, want, Tol{16, 1e-6, DType::F32}, xs, std::string(c.name) + " on i32");
  }
  // Large integers are rounded to f32 first: sqrt(16777217) is sqrt(16777216) = 4096.
  Out o = run_unary(DType::I32, {16777217, 2147483647}, [](const Tensor& t) { return sqrt(t); });
  expect_values(o.v, {4096, std::sqrt(2147483648.0)}, ulps(0.5));
}

TEST(ElementwiseUnaryI32, ExactOpsStayI32) {
  for (const UnaryCase& c : exact_cases()) {
    Out o = run_unary(DType::I32, kIntValues, c.f);
    EXPECT_EQ(o.dtype, DType::I32) << c.name;
    std::vector<double> want;
    for (double x : kIntValues) want.push_back(c.ref(x));
    expect_values(o.v, want, exact(), kIntValues, std::string(c.name) + " on i32");
  }
  // -INT_MIN wraps, as in torch.
  Out o = run_unary(DType::I32, {-2147483648.0}, [](const Tensor& t) { return neg(t); });
  expect_exact(o, {-2147483648.0});
}

TEST(ElementwiseUnaryI32, IsnanIsinfAreFalse) {
  Out n = run_unary(DType::I32, {-5, 0, 7}, [](const Tensor& t) { return isnan(t); });
  EXPECT_EQ(n.dtype, DType::Bool);
  expect_exact(n, {0, 0, 0});
  Out i = run_unary(DType::I32, {-5, 0, 7}, [](const Tensor& t) { return isinf(t); });
  expect_exact(i, {0, 0, 0});
}

TEST(ElementwiseUnaryBool, SignAbsAreIdentityMathGivesF32) {
  Out s = run_unary(DType::Bool, {0, 1}, [](const Tensor& t) { return sign(t); });
  EXPECT_EQ(s.dtype, DType::Bool);
  expect_exact(s, {0, 1});
  Out a = run_unary(DType::Bool, {0, 1}, [](const Tensor& t) { return abs(t); });
  expect_exact(a, {0, 1});
  Out e = run_unary(DType::Bool, {0, 1}, [](const Tensor& t) { return exp(t); });
  EXPECT_EQ(e.dtype, DType::F32);
  expect_values(e.v, {1, std::exp(1.0)}, ulps(2));
}

}  // namespace
}  // namespace luminal
