// argsort / sort / topk against std::stable_sort (torch order: NaN is the largest value).
#include <numeric>

#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;
using Lane = std::vector<double>;

// Stable order of a lane's indices; NaN sorts last ascending and first descending.
std::vector<size_t> order_of(const Lane& v, bool desc) {
  std::vector<size_t> p(v.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](size_t i, size_t j) {
    double a = v[i], b = v[j];
    if (std::isnan(a) || std::isnan(b)) return desc ? (std::isnan(a) && !std::isnan(b)) : (!std::isnan(a) && std::isnan(b));
    return desc ? a > b : a < b;
  });
  return p;
}
Ref argsort_ref(const Ref& x, int axis, bool desc) {
  return along(x, axis, [desc](const Lane& v) {
    Lane r;
    for (size_t i : order_of(v, desc)) r.push_back(static_cast<double>(i));
    return r;
  });
}
Ref sorted_ref(const Ref& x, int axis, bool desc) {
  return along(x, axis, [desc](const Lane& v) {
    Lane r;
    for (size_t i : order_of(v, desc)) r.push_back(v[i]);
    return r;
  });
}

// Runs argsort, sort (values, indices) on x and compares everything with the references.
void check_sort(const Ref& x, DType t, int axis, bool desc) {
  Case c;
  Tensor tx = c.in("x", x, t);
  lm::argsort(tx, axis, desc).output("order");
  auto [values, indices] = lm::sort(tx, axis, desc);
  values.output("values");
  indices.output("indices");
  Interpreter rt = c.run_all();
  std::string ctx = std::string(lm::dtype_name(t)) + " axis " + std::to_string(axis) + (desc ? " desc" : " asc");
  EXPECT_TRUE(same(argsort_ref(x, axis, desc), rt.output("order"), DType::I32)) << ctx;
  EXPECT_TRUE(same(argsort_ref(x, axis, desc), rt.output("indices"), DType::I32)) << ctx;
  EXPECT_TRUE(same(sorted_ref(x, axis, desc), rt.output("values"), t)) << ctx;
}

TEST(SortArgsort, HandCheckedStable) {
  Ref x({6}, {3, 1, 2, 1, 3, 0});
  Case c;
  Tensor t = c.in("x", x);
  lm::argsort(t).output("asc");
  lm::argsort(t, 0, true).output("desc");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({6}, {5, 1, 3, 2, 0, 4}), rt.output("asc"), DType::I32));
  EXPECT_TRUE(same(Ref({6}, {0, 4, 2, 1, 3, 5}), rt.output("desc"), DType::I32));
}

TEST(SortArgsort, TwoDBothAxesWithTies) {
  Ref x = make({4, 5}, [](const Idx& q) { return static_cast<double>((q[0] * 7 + q[1] * 3) % 4) - 1.0; });
  for (int axis : {0, 1, -1})
    for (bool desc : {false, true}) {
      check_sort(x, DType::F32, axis, desc);
      check_sort(x, DType::I32, axis, desc);
    }
  Ref x3 = ramp({2, 4, 3}, 0.5, 5, -1.0);
  for (int axis : {0, 1, 2})
    for (bool desc : {false, true}) check_sort(x3, DType::F32, axis, desc);
}

TEST(SortArgsort, NaNAndInfinities) {
  Ref x({2, 5}, {kNaN, 1, -kInf, kNaN, kInf,
                 0, kNaN, -1, -0.5, kNaN});
  for (int axis : {0, 1})
    for (bool desc : {false, true}) check_sort(x, DType::F32, axis, desc);
  // Hand-checked ascending row 0: -inf, 1, inf, NaN (index 0), NaN (index 3).
  Case c;
  Buffer got = c.run(lm::argsort(c.in("x", x), 1));
  EXPECT_TRUE(same(Ref({2, 5}, {2, 1, 4, 0, 3, 2, 3, 0, 1, 4}), got, DType::I32));
}

TEST(SortArgsort, IntExtremesAndBool) {
  const double lo = -2147483648.0, hi = 2147483647.0;
  for (bool desc : {false, true}) {
    check_sort(Ref({2, 4}, {hi, lo, 0, lo, -1, hi, hi, 1}), DType::I32, 1, desc);
    check_sort(Ref({2, 4}, {1, 0, 1, 0, 0, 0, 1, 1}), DType::Bool, 1, desc);
    check_sort(Ref({2, 4}, {1, 0, 1, 0, 0, 0, 1, 1}), DType::Bool, 0, desc);
  }
}

TEST(SortArgsort, SymbolicLength) {
  Expr n = Expr::var("n");
  Case c;
  Tensor t = c.in("x", Ref({2, 1}, {0, 0}), DType::F32, {2, n});
  lm::argsort(t, 1).output("asc");
  lm::argsort(t, 1, true).output("desc");
  for (int64_t len : {1, 4, 6}) {
    Ref x = make({2, len}, [](const Idx& q) { return static_cast<double>((q[1] * 5 + q[0]) % 3); });
    c.set("x", x, DType::F32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(same(argsort_ref(x, 1, false), rt.output("asc"))) << "n=" << len;
    EXPECT_TRUE(same(argsort_ref(x, 1, true), rt.output("desc"))) << "n=" << len;
  }
}

TEST(SortArgsort, OfAView) {
  Ref x = ramp({3, 4}, 1.0, 5, 0.0);
  Case c;
  Tensor t = c.in("x", x);
  auto [v, i] = lm::sort(lm::transpose(lm::flip(t, {1}), 0, 1), 1);
  v.output("v");
  i.output("i");
  Interpreter rt = c.run_all();
  Ref view = transpose(flip(x, {1}), 0, 1);
  EXPECT_TRUE(same(sorted_ref(view, 1, false), rt.output("v")));
  EXPECT_TRUE(same(argsort_ref(view, 1, false), rt.output("i")));
}

TEST(SortTopk, LargestAndSmallest) {
  Ref x = make({3, 6}, [](const Idx& q) { return static_cast<double>((q[0] * 5 + q[1] * 4) % 7) - 3.0; });
  for (int axis : {1, 0})
    for (bool largest : {true, false})
      for (int64_t k : {0, 1, 3}) {
        Case c;
        auto [v, i] = lm::topk(c.in("x", x), k, axis, largest);
        v.output("v");
        i.output("i");
        Interpreter rt = c.run_all();
        std::string ctx = "axis " + std::to_string(axis) + " k " + std::to_string(k) + (largest ? " largest" : " smallest");
        EXPECT_TRUE(same(slice(sorted_ref(x, axis, largest), axis, 0, k), rt.output("v"), DType::F32)) << ctx;
        EXPECT_TRUE(same(slice(argsort_ref(x, axis, largest), axis, 0, k), rt.output("i"), DType::I32)) << ctx;
      }
  // Hand-checked: topk([1, 5, 2, 5, 0], 2) = values [5, 5], indices [1, 3]; smallest: [0, 1] at [4, 0].
  Case c;
  Tensor t = c.in("x", Ref({5}, {1, 5, 2, 5, 0}));
  auto [v, i] = lm::topk(t, 2);
  auto [sv, si] = lm::topk(t, 2, -1, false);
  v.output("v");
  i.output("i");
  sv.output("sv");
  si.output("si");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({2}, {5, 5}), rt.output("v")));
  EXPECT_TRUE(same(Ref({2}, {1, 3}), rt.output("i")));
  EXPECT_TRUE(same(Ref({2}, {0, 1}), rt.output("sv")));
  EXPECT_TRUE(same(Ref({2}, {4, 0}), rt.output("si")));
  // k equal to the axis length: the whole sorted axis.
  Case c2;
  auto [fv, fi] = lm::topk(c2.in("x", Ref({3}, {kNaN, 2, 7})), 3);
  fv.output("v");
  Interpreter rt2 = c2.run_all();
  EXPECT_TRUE(same(Ref({3}, {kNaN, 7, 2}), rt2.output("v")));  // NaN is the largest (torch)
}

TEST(SortErrors, TopkAndAxes) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {2, 5});
  EXPECT_TRUE(throws_error([&] { lm::topk(x, 6); }, {"topk", "k = 6", "5"}));
  EXPECT_TRUE(throws_error([&] { lm::topk(x, 3, 0); }, {"topk", "k = 3", "2"}));
  EXPECT_TRUE(throws_error([&] { lm::topk(x, -1); }, {"topk"}));
  EXPECT_TRUE(throws_error([&] { lm::topk(x, 1, 2); }, {"topk", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::argsort(x, -3); }, {"argsort", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::sort(x, 2); }, {"out of range"}));
}

}  // namespace
