// Comparisons, logical ops and where: bool results, NaN handling, non-bool inputs, broadcasting,
// and where's exactness with infinities and NaN in either branch.
#include "elementwise_util.h"

namespace luminal {
namespace {

using namespace ewtest;

#define BFN(op) [](const Tensor& a, const Tensor& b) { return op(a, b); }

const DType F32 = DType::F32, I32 = DType::I32, F16 = DType::F16, BOOL = DType::Bool;

struct CmpCase {
  const char* name;
  BinaryFn f;
  bool (*ref)(double, double);
};

std::vector<CmpCase> cmp_cases() {
  return {
      {"eq", BFN(eq), [](double a, double b) { return a == b; }},
      {"ne", BFN(ne), [](double a, double b) { return a != b; }},
      {"lt", BFN(lt), [](double a, double b) { return a < b; }},
      {"le", BFN(le), [](double a, double b) { return a <= b; }},
      {"gt", BFN(gt), [](double a, double b) { return a > b; }},
      {"ge", BFN(ge), [](double a, double b) { return a >= b; }},
  };
}

void check_compare(DType da, const std::vector<double>& a, DType db, const std::vector<double>& b) {
  for (const CmpCase& c : cmp_cases()) {
    Out o = run_binary(da, a, db, b, c.f);
    EXPECT_EQ(o.dtype, BOOL) << c.name;
    std::vector<double> want;
    for (size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]) ? 1 : 0);
    expect_values(o.v, want, exact(), a, std::string(c.name) + " " + dtype_name(da) + "/" + dtype_name(db));
  }
}

TEST(ElementwiseCompare, FloatsWithNaNAndInfinities) {
  // NaN compares false everywhere except ne; -0 == 0.
  check_compare(F32, {1, 2, 3, kNaN, 1, kNaN, kInf, -kInf, -0.0, -kInf, 1e-45},
                F32, {2, 2, 1, 1, kNaN, kNaN, kInf, kInf, 0, -kInf, 0});
}

TEST(ElementwiseCompare, IntegersBoolsAndLowPrecision) {
  check_compare(I32, {-2147483648.0, 2147483647, 5, -5, 0}, I32, {2147483647, 2147483647, 4, -4, 0});
  check_compare(BOOL, {0, 0, 1, 1}, BOOL, {0, 1, 0, 1});
  check_compare(F16, {1, 0.5, kNaN, 65504}, F16, {1.0009765625, 0.5, 1, kInf});
  // Mixed dtypes promote first: i32 3 vs f32 2.5.
  check_compare(I32, {3, 3, 2}, F32, {2.5, 3, 2.5});
}

TEST(ElementwiseCompare, BroadcastsAndScalarForms) {
  Out o = run_binary(F32, {1, 5, 3, 4, 2, 6}, {2, 3}, F32, {3, 3, 3}, {3}, BFN(lt));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {1, 0, 0, 0, 1, 0});
  Out s = run_unary(F32, {-1, 0, 2, kNaN}, [](const Tensor& t) { return ge(t, scalar_like(t, 0.0)); });
  EXPECT_EQ(s.shape, std::vector<int64_t>{4});
  expect_exact(s, {0, 1, 1, 0});
}

// ---- logical ----------------------------------------------------------------------------------

TEST(ElementwiseLogical, BoolTruthTables) {
  std::vector<double> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  expect_exact(run_binary(BOOL, a, BOOL, b, BFN(logical_and)), {0, 0, 0, 1});
  expect_exact(run_binary(BOOL, a, BOOL, b, BFN(logical_or)), {0, 1, 1, 1});
  expect_exact(run_binary(BOOL, a, BOOL, b, BFN(logical_xor)), {0, 1, 1, 0});
  Out n = run_unary(BOOL, a, [](const Tensor& t) { return logical_not(t); });
  EXPECT_EQ(n.dtype, BOOL);
  expect_exact(n, {1, 1, 0, 0});
}

TEST(ElementwiseLogical, NonBoolInputsAreNonZero) {
  // x != 0: NaN and -inf are true, -0 is false.
  std::vector<double> a = {0, -0.0, 0.5, -2, kNaN, -kInf, 0, 3};
  std::vector<double> b = {7, 1, 0, -1, 1, 0, -0.0, kNaN};
  auto truth = [](double v) { return v != 0; };
  std::vector<double> want_and, want_or, want_xor, want_not;
  for (size_t i = 0; i < a.size(); ++i) {
    want_and.push_back(truth(a[i]) && truth(b[i]));
    want_or.push_back(truth(a[i]) || truth(b[i]));
    want_xor.push_back(truth(a[i]) != truth(b[i]));
    want_not.push_back(!truth(a[i]));
  }
  for (auto [name, f, want] : std::vector<std::tuple<const char*, BinaryFn, std::vector<double>>>{
           {"and", BFN(logical_and), want_and}, {"or", BFN(logical_or), want_or}, {"xor", BFN(logical_xor), want_xor}}) {
    Out o = run_binary(F32, a, F32, b, f);
    EXPECT_EQ(o.dtype, BOOL) << name;
    expect_values(o.v, want, exact(), a, std::string("f32 logical_") + name);
  }
  expect_exact(run_unary(F32, a, [](const Tensor& t) { return logical_not(t); }), want_not, "f32 logical_not");
  // i32 with f32, and broadcasting.
  Out m = run_binary(I32, {0, 2, -1}, {3}, F32, {0, 0.25}, {2, 1}, BFN(logical_and));
  EXPECT_EQ(m.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(m, {0, 0, 0, 0, 1, 1});
  expect_exact(run_unary(I32, {0, 5, -2147483648.0}, [](const Tensor& t) { return logical_not(t); }), {1, 0, 0});
}

// ---- where ------------------------------------------------------------------------------------

TEST(ElementwiseWhere, ExactWithInfinitiesAndNaN) {
  std::vector<double> cond = {1, 0, 1, 0, 1, 0, 1, 0};
  std::vector<double> a = {kInf, kInf, -kInf, 1, kNaN, 2, -0.0, 3.4e38};
  std::vector<double> b = {-kInf, kNaN, 5, -kInf, 4, kNaN, 7, 1e-45};
  Graph g;
  Tensor c = input(g, "c", BOOL, {8});
  Tensor x = input(g, "a", F32, {8});
  Tensor y = input(g, "b", F32, {8});
  Out o = run_graph(g, where(c, x, y),
                    {{"c", make_buffer(BOOL, cond, {8})}, {"a", make_buffer(F32, a, {8})}, {"b", make_buffer(F32, b, {8})}});
  EXPECT_EQ(o.dtype, F32);
  std::vector<double> want;
  for (size_t i = 0; i < cond.size(); ++i) want.push_back(cond[i] ? a[i] : static_cast<float>(b[i]));
  expect_exact(o, want);
}

// Exact includes the sign of zero: where(c, -0.0, ...) must give -0 (torch, numpy do).
TEST(ElementwiseWhere, KeepsNegativeZero) {
  Graph g;
  Tensor c = input(g, "c", BOOL, {3});
  Tensor x = input(g, "a", F32, {3});
  Tensor y = input(g, "b", F32, {3});
  Out o = run_graph(g, where(c, x, y),
                    {{"c", Buffer::boolean({true, false, true}, {3})},
                     {"a", Buffer::f32({-0.0f, 1, 2}, {3})},
                     {"b", Buffer::f32({5, -0.0f, 7}, {3})}});
  expect_exact(o, {0, 0, 2});
  EXPECT_TRUE(std::signbit(o.v[0])) << "where(true, -0, 5) gave +0";
  EXPECT_TRUE(std::signbit(o.v[1])) << "where(false, 1, -0) gave +0";
}

TEST(ElementwiseWhere, ScalarBranches) {
  Graph g;
  Tensor x = input(g, "x", F32, {5});
  Tensor y = where(gt(x, scalar_like(x, 0.0)), x, -kInf);   // masking, as attention does
  Tensor z = where(isnan(x), 0.0, x);                         // NaN scrubbing
  Tensor both = stack({y, z}, 0);
  Out o = run_graph(g, both, {{"x", make_buffer(F32, {-1, 2, kNaN, kInf, 0}, {5})}});
  expect_exact(o, {-kInf, 2, -kInf, kInf, -kInf, -1, 2, 0, kInf, 0});
}

TEST(ElementwiseWhere, BroadcastsAllThree) {
  // cond [2,1], a [3], b rank 0 -> [2,3].
  Graph g;
  Tensor c = input(g, "c", BOOL, {2, 1});
  Tensor a = input(g, "a", F32, {3});
  Tensor b = input(g, "b", F32, {});
  Out o = run_graph(g, where(c, a, b),
                    {{"c", Buffer::boolean({true, false}, {2, 1})},
                     {"a", make_buffer(F32, {1, kInf, 3}, {3})},
                     {"b", make_buffer(F32, {-kInf}, {})}});
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 3}));
  expect_exact(o, {1, kInf, 3, -kInf, -kInf, -kInf});
}

TEST(ElementwiseWhere, PromotesBranchDtypes) {
  Graph g;
  Tensor c = input(g, "c", BOOL, {3});
  Tensor a = input(g, "a", I32, {3});
  Tensor b = input(g, "b", F32, {3});
  Out o = run_graph(g, where(c, a, b),
                    {{"c", Buffer::boolean({true, false, true}, {3})},
                     {"a", Buffer::i32({7, 8, -9}, {3})},
                     {"b", Buffer::f32({0.5, 1.5, 2.5}, {3})}});
  EXPECT_EQ(o.dtype, F32);
  expect_exact(o, {7, 1.5, -9});
  // i32 branches stay i32 and exact beyond 2^24.
  Graph g2;
  Tensor c2 = input(g2, "c", BOOL, {2});
  Tensor a2 = input(g2, "a", I32, {2});
  Out o2 = run_graph(g2, where(c2, a2, -2147483648.0),
                     {{"c", Buffer::boolean({true, false}, {2})}, {"a", Buffer::i32({16777217, 1}, {2})}});
  EXPECT_EQ(o2.dtype, I32);
  expect_exact(o2, {16777217, -2147483648.0});
}

// A non-bool condition means cond != 0 (numpy); it must pick a branch, never produce a value
// that is in neither.
TEST(ElementwiseWhere, NonBoolConditionIsNonZero) {
  Graph g;
  Tensor c = input(g, "c", I32, {4});
  Tensor a = input(g, "a", F32, {4});
  Tensor b = input(g, "b", F32, {4});
  Out o = run_graph(g, where(c, a, b),
                    {{"c", Buffer::i32({0, 1, 2, -1}, {4})},
                     {"a", Buffer::f32({10, 20, 30, 40}, {4})},
                     {"b", Buffer::f32({-1, -2, -3, -4}, {4})}});
  expect_exact(o, {-1, 20, 30, 40}, "i32 condition");
  Graph g2;
  Tensor c2 = input(g2, "c", F32, {3});
  Tensor a2 = input(g2, "a", F32, {3});
  Out o2 = run_graph(g2, where(c2, a2, 0.0),
                     {{"c", Buffer::f32({0.5, 0, kNaN}, {3})}, {"a", Buffer::f32({1, 2, 3}, {3})}});
  expect_exact(o2, {1, 0, 3}, "f32 condition");
}

}  // namespace
}  // namespace luminal
