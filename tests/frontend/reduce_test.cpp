// Reductions over sets of axes (sum, mean, max, min, prod, var, std, logsumexp, any, all,
// argmax, argmin) against naive loops in double.
#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;
using Lane = std::vector<double>;
using RefFn = std::function<double(const Lane&)>;
using OpFn = std::function<Tensor(const Tensor&, const std::vector<int>&, bool)>;

double r_sum(const Lane& v) { double s = 0; for (double x : v) s += x; return s; }
double r_mean(const Lane& v) { return r_sum(v) / static_cast<double>(v.size()); }
double r_max(const Lane& v) {
  double m = -kInf;
  for (double x : v) { if (std::isnan(x)) return kNaN; m = std::max(m, x); }
  return m;
}
double r_min(const Lane& v) {
  double m = kInf;
  for (double x : v) { if (std::isnan(x)) return kNaN; m = std::min(m, x); }
  return m;
}
double r_prod(const Lane& v) { double p = 1; for (double x : v) p *= x; return p; }
RefFn r_var(int64_t corr) {
  return [corr](const Lane& v) {
    double m = r_mean(v), ss = 0;
    for (double x : v) ss += (x - m) * (x - m);
    return ss / static_cast<double>(static_cast<int64_t>(v.size()) - corr);
  };
}
double r_lse(const Lane& v) {
  double m = r_max(v);
  if (std::isinf(m)) return m;  // all -inf -> -inf; any +inf -> +inf
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}
double r_any(const Lane& v) { for (double x : v) if (x != 0) return 1; return 0; }
double r_all(const Lane& v) { for (double x : v) if (x == 0) return 0; return 1; }

const std::vector<std::vector<int>> kAxisSets = {{0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {1, 2}, {0, 1, 2}, {-3, -2}};

// Checks op against ref on x for every axis set and keepdim.
void check_all_axes(const char* what, const Ref& x, DType t, const OpFn& op, const RefFn& ref, DType out_t,
                    double tol = 0) {
  for (const auto& axes : kAxisSets)
    for (bool keep : {false, true}) {
      Case c;
      Tensor tx = c.in("x", x, t);
      Buffer got = c.run(op(tx, axes, keep));
      Ref want = reduce(x, axes, keep, ref);
      std::string ctx = std::string(what) + " axes " + str(Idx(axes.begin(), axes.end())) + (keep ? " keepdim" : "");
      EXPECT_EQ(got.dtype(), out_t) << ctx;
      EXPECT_TRUE(tol == 0 ? same(want, got) : near(want, got, tol, tol)) << ctx;
    }
}

TEST(ReduceBasic, F32AllAxisSets) {
  Ref x = ramp({2, 3, 4});
  check_all_axes("sum", x, DType::F32, [](auto& t, auto& a, bool k) { return lm::sum(t, a, k); }, r_sum, DType::F32);
  check_all_axes("mean", x, DType::F32, [](auto& t, auto& a, bool k) { return lm::mean(t, a, k); }, r_mean, DType::F32,
                 1e-6);
  check_all_axes("max", x, DType::F32, [](auto& t, auto& a, bool k) { return lm::max(t, a, k); }, r_max, DType::F32);
  check_all_axes("min", x, DType::F32, [](auto& t, auto& a, bool k) { return lm::min(t, a, k); }, r_min, DType::F32);
  check_all_axes("method sum", x, DType::F32, [](auto& t, auto& a, bool k) { return t.sum(a, k); }, r_sum, DType::F32);
  check_all_axes("method max", x, DType::F32, [](auto& t, auto& a, bool k) { return t.max(a, k); }, r_max, DType::F32);
}

TEST(ReduceBasic, HandChecked) {
  Case c;
  Tensor x = c.in("x", Ref({2, 3}, {1, -2, 3, 4, 5, -6}));
  lm::sum(x, {1}).output("s");
  lm::sum(x, {0}, true).output("s0");
  lm::mean(x, {0, 1}).output("m");
  lm::max(x, {1}).output("mx");
  lm::min(x, {0}).output("mn");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({2}, {2, 3}), rt.output("s")));
  EXPECT_TRUE(same(Ref({1, 3}, {5, 3, -3}), rt.output("s0")));
  EXPECT_TRUE(near(Ref({}, {5.0 / 6.0}), rt.output("m"), 1e-6, 0));
  EXPECT_EQ(rt.output("m").shape(), Idx{});
  EXPECT_TRUE(same(Ref({2}, {3, 5}), rt.output("mx")));
  EXPECT_TRUE(same(Ref({3}, {1, -2, -6}), rt.output("mn")));
}

TEST(ReduceBasic, NaNAndInfPropagate) {
  Ref x({3, 3}, {1, kNaN, 2, -kInf, -kInf, -kInf, kInf, 0, -1});
  Case c;
  Tensor t = c.in("x", x);
  lm::max(t, {1}).output("mx");
  lm::min(t, {1}).output("mn");
  lm::sum(t, {1}).output("s");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({3}, {kNaN, -kInf, kInf}), rt.output("mx")));
  EXPECT_TRUE(same(Ref({3}, {kNaN, -kInf, -1}), rt.output("mn")));
  EXPECT_TRUE(same(Ref({3}, {kNaN, -kInf, kInf}), rt.output("s")));
}

TEST(ReduceBasic, I32WrapsAndExtremes) {
  const double lo = -2147483648.0, hi = 2147483647.0;
  Ref x({2, 3}, {hi, 1, 0, lo, -1, 5});
  Case c;
  Tensor t = c.in("x", x, DType::I32);
  lm::sum(t, {1}).output("s");
  lm::min(t, {1}).output("mn");
  lm::max(t, {1}).output("mx");
  lm::min(t, {0, 1}).output("mn_all");
  lm::mean(t, {0}).output("mean");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({2}, {lo, lo + 4}), rt.output("s"), DType::I32));  // INT_MAX + 1 wraps
  EXPECT_TRUE(same(Ref({2}, {0, lo}), rt.output("mn"), DType::I32));
  EXPECT_TRUE(same(Ref({2}, {hi, 5}), rt.output("mx"), DType::I32));
  EXPECT_TRUE(same(Ref({}, {lo}), rt.output("mn_all"), DType::I32));
  EXPECT_EQ(rt.output("mean").dtype(), DType::F32);
  // In f32, INT_MAX rounds to 2^31, so (INT_MAX + INT_MIN) / 2 is 0.
  EXPECT_TRUE(near(Ref({3}, {0, 0, 2.5}), rt.output("mean"), 1e-6, 1e-6));
  // An all-INT_MIN row: min and max are INT_MIN.
  Ref y({1, 3}, {lo, lo, lo});
  Case c2;
  Tensor ty = c2.in("y", y, DType::I32);
  lm::min(ty, {1}).output("mn");
  lm::max(ty, {1}).output("mx");
  Interpreter rt2 = c2.run_all();
  EXPECT_TRUE(same(Ref({1}, {lo}), rt2.output("mn")));
  EXPECT_TRUE(same(Ref({1}, {lo}), rt2.output("mx")));

  Ref xi = make({2, 3, 4}, [](const Idx& q) { return static_cast<double>((q[0] * 12 + q[1] * 4 + q[2]) * 29 % 37 - 18); });
  check_all_axes("i32 sum", xi, DType::I32, [](auto& t, auto& a, bool k) { return lm::sum(t, a, k); }, r_sum, DType::I32);
  check_all_axes("i32 max", xi, DType::I32, [](auto& t, auto& a, bool k) { return lm::max(t, a, k); }, r_max, DType::I32);
  check_all_axes("i32 min", xi, DType::I32, [](auto& t, auto& a, bool k) { return lm::min(t, a, k); }, r_min, DType::I32);
}

TEST(ReduceBasic, BoolSumCounts) {
  Ref b = make({2, 3, 4}, [](const Idx& q) { return static_cast<double>((q[0] + q[1] * 2 + q[2] * 3) % 3 == 0); });
  check_all_axes("bool sum", b, DType::Bool, [](auto& t, auto& a, bool k) { return lm::sum(t, a, k); }, r_sum,
                 DType::I32);
  check_all_axes("bool max", b, DType::Bool, [](auto& t, auto& a, bool k) { return lm::max(t, a, k); }, r_max,
                 DType::Bool);
  check_all_axes("bool min", b, DType::Bool, [](auto& t, auto& a, bool k) { return lm::min(t, a, k); }, r_min,
                 DType::Bool);
  check_all_axes("bool mean", b, DType::Bool, [](auto& t, auto& a, bool k) { return lm::mean(t, a, k); }, r_mean,
                 DType::F32, 1e-6);
}

TEST(ReduceProd, ConstantLengthsWithZerosAndNegatives) {
  for (int64_t n : {1, 2, 3, 5, 7, 8}) {
    Ref x = make({4, n}, [&](const Idx& q) {
      if (q[0] == 1 && q[1] == n / 2) return 0.0;  // one zero in row 1
      double v = static_cast<double>((q[0] * 5 + q[1] * 3) % 5) - 2.0;
      return v == 0 ? 1.5 : v;  // row 3 is all non-zero; signs mixed
    });
    for (const std::vector<int>& axes : std::vector<std::vector<int>>{{1}, {0}, {0, 1}, {-1}})
      for (bool keep : {false, true}) {
        Case c;
        Tensor t = c.in("x", x);
        EXPECT_TRUE(same(reduce(x, axes, keep, r_prod), c.run(lm::prod(t, axes, keep))))
            << "n=" << n << " axes " << str(Idx(axes.begin(), axes.end())) << " keep " << keep;
      }
  }
  // Hand-checked: prod([-1, 2, -3, 4, -5]) = -120, prod([2, -1, 0, 3, 1, 1, -2]) = 0.
  Case c;
  Tensor a = c.in("a", Ref({5}, {-1, 2, -3, 4, -5})), b = c.in("b", Ref({7}, {2, -1, 0, 3, 1, 1, -2}));
  lm::prod(a, {0}).output("a");
  lm::prod(b, {0}).output("b");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({}, {-120}), rt.output("a")));
  EXPECT_EQ(rt.output("b").get(0), 0.0);
}

TEST(ReduceProd, IntAndBool) {
  Case c;
  Tensor i = c.in("i", Ref({2, 5}, {-1, 2, -3, 4, -5, 65536, 65536, 1, 1, 1}), DType::I32);
  Tensor b = c.in("b", Ref({2, 3}, {1, 1, 1, 1, 0, 1}), DType::Bool);
  lm::prod(i, {1}).output("i");
  lm::prod(b, {1}).output("b");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({2}, {-120, 0}), rt.output("i"), DType::I32));  // 2^32 wraps to 0
  EXPECT_TRUE(same(Ref({2}, {1, 0}), rt.output("b"), DType::I32));
}

TEST(ReduceProd, SymbolicAxis) {
  Expr n = Expr::var("n");
  Case c;
  Tensor x = c.in("x", Ref({2, 1}, {1, 1}), DType::F32, {2, n});
  Tensor xi = c.in("xi", Ref({1}, {1}), DType::I32, {n});
  lm::prod(x, {1}).output("p");
  lm::prod(x, {1}, true).output("pk");
  lm::prod(xi, {0}).output("pi");
  for (int64_t len : {3, 4}) {
    Ref v = make({2, len}, [&](const Idx& q) {
      if (q[0] == 1 && q[1] == 1) return 0.0;
      double a = 0.5 + static_cast<double>((q[1] * 3 + 1) % 4);
      return q[1] % 2 ? -a : a;
    });
    Ref vi = make({len}, [](const Idx& q) { return q[0] % 2 ? -3.0 : 2.0 + q[0]; });
    c.set("x", v, DType::F32);
    c.set("xi", vi, DType::I32);
    Interpreter rt = c.run_all();
    EXPECT_TRUE(near(reduce(v, {1}, false, r_prod), rt.output("p"), 1e-5, 0)) << "n=" << len;
    EXPECT_TRUE(near(reduce(v, {1}, true, r_prod), rt.output("pk"), 1e-5, 0)) << "n=" << len;
    EXPECT_TRUE(same(reduce(vi, {0}, false, r_prod), rt.output("pi"), DType::I32)) << "n=" << len;
  }
}

TEST(ReduceVar, CorrectionsAndStd) {
  Ref x = ramp({2, 3, 4}, 0.75, 13, -4.0);
  for (int64_t corr : {0, 1}) {
    check_all_axes("var", x, DType::F32, [corr](auto& t, auto& a, bool k) { return lm::var(t, a, corr, k); },
                   r_var(corr), DType::F32, 1e-5);
    RefFn sd = [corr](const Lane& v) { return std::sqrt(r_var(corr)(v)); };
    check_all_axes("std", x, DType::F32, [corr](auto& t, auto& a, bool k) { return lm::std(t, a, corr, k); }, sd,
                   DType::F32, 1e-5);
  }
  // Hand-checked: var([1,2,3,4]) = 1.25 (correction 0), 5/3 (correction 1).
  Case c;
  Tensor t = c.in("x", Ref({4}, {1, 2, 3, 4}), DType::I32);
  lm::var(t, {0}, 0).output("v0");
  lm::var(t, {0}, 1).output("v1");
  lm::std(t, {0}, 0).output("s0");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(near(Ref({}, {1.25}), rt.output("v0"), 1e-6, 0));
  EXPECT_TRUE(near(Ref({}, {5.0 / 3.0}), rt.output("v1"), 1e-6, 0));
  EXPECT_TRUE(near(Ref({}, {std::sqrt(1.25)}), rt.output("s0"), 1e-6, 0));
  EXPECT_EQ(rt.output("v0").dtype(), DType::F32);
}

TEST(ReduceLogsumexp, StableAndInfinities) {
  Ref x = ramp({2, 3, 4});
  check_all_axes("lse", x, DType::F32, [](auto& t, auto& a, bool k) { return lm::logsumexp(t, a, k); }, r_lse,
                 DType::F32, 1e-5);
  Ref y({5, 3}, {-kInf, -kInf, -kInf,     // all -inf -> -inf
                 1000, 1000, 999,         // no overflow
                 -1000, -1001, -1000,     // no underflow to -inf
                 -kInf, 0, 1,             // -inf terms contribute 0
                 kInf, 1, 2});            // +inf -> +inf
  Case c;
  Tensor t = c.in("y", y);
  lm::logsumexp(t, {1}).output("l");
  lm::logsumexp(t, {1}, true).output("lk");
  Interpreter rt = c.run_all();
  Ref want = reduce(y, {1}, false, r_lse);
  EXPECT_EQ(want.data[0], -kInf);
  EXPECT_TRUE(near(want, rt.output("l"), 1e-6, 1e-5));
  EXPECT_TRUE(near(reduce(y, {1}, true, r_lse), rt.output("lk"), 1e-6, 1e-5));
  // i32 input gives f32
  Case c2;
  Tensor ti = c2.in("i", Ref({2}, {0, 0}), DType::I32);
  Buffer got = c2.run(lm::logsumexp(ti, {0}));
  EXPECT_EQ(got.dtype(), DType::F32);
  EXPECT_TRUE(near(Ref({}, {std::log(2.0)}), got, 1e-6, 1e-6));
}

TEST(ReduceAnyAll, DtypesAndAxes) {
  Ref f = make({2, 3, 4}, [](const Idx& q) {
    int64_t i = q[0] * 12 + q[1] * 4 + q[2];
    return i % 5 == 0 ? 0.0 : (i == 7 ? kNaN : (i % 3 ? 0.0 : -2.5));
  });
  Ref i = make({2, 3, 4}, [](const Idx& q) { return (q[1] + q[2]) % 3 ? 0.0 : -7.0; });
  Ref b = make({2, 3, 4}, [](const Idx& q) { return (q[0] + q[2] * q[1]) % 2 ? 1.0 : 0.0; });
  for (auto [x, t] : std::vector<std::pair<Ref, DType>>{{f, DType::F32}, {i, DType::I32}, {b, DType::Bool}}) {
    check_all_axes("any", x, t, [](auto& tt, auto& a, bool k) { return lm::any(tt, a, k); }, r_any, DType::Bool);
    check_all_axes("all", x, t, [](auto& tt, auto& a, bool k) { return lm::all(tt, a, k); }, r_all, DType::Bool);
  }
  Case c;
  Tensor t = c.in("x", Ref({3, 2}, {0, 0, 0, 3, 1, -1}));
  lm::any(t, {1}).output("any");
  lm::all(t, {1}).output("all");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({3}, {0, 1, 1}), rt.output("any")));
  EXPECT_TRUE(same(Ref({3}, {0, 0, 1}), rt.output("all")));
}

// First index of the max (or min) along an axis; NaN counts as the extreme (torch).
Ref arg_ref(const Ref& x, int axis, bool keep, bool is_max) {
  return reduce(x, {axis}, keep, [is_max](const Lane& v) {
    size_t best = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      if (std::isnan(v[best])) break;
      if (std::isnan(v[k]) || (is_max ? v[k] > v[best] : v[k] < v[best])) best = k;
    }
    return static_cast<double>(best);
  });
}

TEST(ReduceArg, TiesNaNAndDtypes) {
  Ref x({3, 4}, {1, 3, 3, 2,    // tie on max: first index
                 -1, -1, 5, -1,  // tie on min
                 0, kNaN, 9, kNaN});
  for (int axis : {0, 1, -1})
    for (bool keep : {false, true}) {
      Case c;
      Tensor t = c.in("x", x);
      lm::argmax(t, axis, keep).output("amax");
      lm::argmin(t, axis, keep).output("amin");
      Interpreter rt = c.run_all();
      EXPECT_TRUE(same(arg_ref(x, axis, keep, true), rt.output("amax"), DType::I32)) << axis << keep;
      EXPECT_TRUE(same(arg_ref(x, axis, keep, false), rt.output("amin"), DType::I32)) << axis << keep;
    }
  // Hand-checked rows.
  Case c;
  Tensor t = c.in("x", x);
  lm::argmax(t, 1).output("amax");
  lm::argmin(t, 1).output("amin");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({3}, {1, 2, 1}), rt.output("amax")));
  EXPECT_TRUE(same(Ref({3}, {0, 0, 1}), rt.output("amin")));

  const double lo = -2147483648.0, hi = 2147483647.0;
  Ref xi({2, 4}, {lo, hi, lo, hi, 0, -1, 0, -1});
  Ref xb({2, 3}, {0, 1, 1, 1, 1, 0});
  Case ci;
  Tensor ti = ci.in("i", xi, DType::I32), tb = ci.in("b", xb, DType::Bool);
  lm::argmax(ti, 1).output("imax");
  lm::argmin(ti, 1).output("imin");
  lm::argmax(ti, 0).output("imax0");
  lm::argmax(tb, 1).output("bmax");
  lm::argmin(tb, 1).output("bmin");
  Interpreter rti = ci.run_all();
  EXPECT_TRUE(same(Ref({2}, {1, 0}), rti.output("imax"), DType::I32));
  EXPECT_TRUE(same(Ref({2}, {0, 1}), rti.output("imin"), DType::I32));
  EXPECT_TRUE(same(Ref({4}, {1, 0, 1, 0}), rti.output("imax0"), DType::I32));
  EXPECT_TRUE(same(Ref({2}, {1, 0}), rti.output("bmax"), DType::I32));
  EXPECT_TRUE(same(Ref({2}, {0, 2}), rti.output("bmin"), DType::I32));
}

TEST(ReduceSymbolic, AxisOfDynamicLength) {
  Expr n = Expr::var("n");
  Case c;
  Tensor x = c.in("x", Ref({2, 1}, {0, 0}), DType::F32, {2, n});
  lm::sum(x, {1}).output("sum");
  lm::mean(x, {1}, true).output("mean");
  lm::max(x, {1}).output("max");
  lm::min(x, {0, 1}).output("min");
  lm::var(x, {1}).output("var");
  lm::logsumexp(x, {1}).output("lse");
  lm::argmax(x, 1).output("amax");
  for (int64_t len : {3, 5}) {
    Ref v = ramp({2, len});
    c.set("x", v, DType::F32);
    Interpreter rt = c.run_all();
    std::string ctx = "n=" + std::to_string(len);
    EXPECT_TRUE(same(reduce(v, {1}, false, r_sum), rt.output("sum"))) << ctx;
    EXPECT_TRUE(near(reduce(v, {1}, true, r_mean), rt.output("mean"), 1e-6, 1e-6)) << ctx;
    EXPECT_TRUE(same(reduce(v, {1}, false, r_max), rt.output("max"))) << ctx;
    EXPECT_TRUE(same(reduce(v, {0, 1}, false, r_min), rt.output("min"))) << ctx;
    EXPECT_TRUE(near(reduce(v, {1}, false, r_var(1)), rt.output("var"), 1e-5, 1e-5)) << ctx;
    EXPECT_TRUE(near(reduce(v, {1}, false, r_lse), rt.output("lse"), 1e-5, 1e-5)) << ctx;
    EXPECT_TRUE(same(arg_ref(v, 1, false, true), rt.output("amax"), DType::I32)) << ctx;
  }
}

TEST(ReduceViews, PaddedExpandedAndEmpty) {
  Ref x = ramp({3, 4});
  Ref p7 = pad(x, {{0, 0}, {1, 2}}, 7), pinf = pad(x, {{1, 0}, {0, 1}}, -kInf);
  Case c;
  Tensor t = c.in("x", x);
  lm::sum(lm::pad(t, {{0, 0}, {1, 2}}, 7), {1}).output("sum_pad");
  lm::prod(lm::pad(t, {{0, 0}, {1, 2}}, 7), {1}).output("prod_pad");
  lm::max(lm::pad(t, {{1, 0}, {0, 1}}, -kInf), {0, 1}, true).output("max_pad");
  lm::argmin(lm::pad(t, {{1, 0}, {0, 1}}, -kInf), 1).output("argmin_pad");
  Tensor col = lm::slice(t, 1, 2, 3);  // [3, 1]
  lm::sum(lm::expand(col, {3, 5}), {1}).output("sum_exp");
  lm::argmax(lm::expand(col, {3, 5}), 1).output("argmax_exp");
  lm::mean(lm::transpose(t, 0, 1), {0}).output("mean_t");
  Tensor empty = lm::slice(t, 1, 2, 2);  // [3, 0]
  lm::sum(empty, {1}).output("sum_empty");
  lm::prod(empty, {1}).output("prod_empty");
  lm::any(empty, {1}).output("any_empty");
  lm::all(empty, {1}).output("all_empty");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(reduce(p7, {1}, false, r_sum), rt.output("sum_pad")));
  EXPECT_TRUE(same(reduce(p7, {1}, false, r_prod), rt.output("prod_pad")));
  EXPECT_TRUE(same(reduce(pinf, {0, 1}, true, r_max), rt.output("max_pad")));
  EXPECT_TRUE(same(Ref({4}, {0, 4, 4, 4}), rt.output("argmin_pad")));  // row 0 all -inf; then the padded column
  Ref colv = slice(x, 1, 2, 3);
  EXPECT_TRUE(same(make({3}, [&](const Idx& q) { return 5 * colv.at({q[0], 0}); }), rt.output("sum_exp")));
  EXPECT_TRUE(same(Ref({3}, {0, 0, 0}), rt.output("argmax_exp"), DType::I32));
  EXPECT_TRUE(near(reduce(x, {1}, false, r_mean), rt.output("mean_t"), 1e-6, 1e-6));
  EXPECT_TRUE(same(Ref({3}, {0, 0, 0}), rt.output("sum_empty")));
  EXPECT_TRUE(same(Ref({3}, {1, 1, 1}), rt.output("prod_empty")));
  EXPECT_TRUE(same(Ref({3}, {0, 0, 0}), rt.output("any_empty"), DType::Bool));
  EXPECT_TRUE(same(Ref({3}, {1, 1, 1}), rt.output("all_empty"), DType::Bool));
}

TEST(ReduceErrors, Axes) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {2, 3});
  EXPECT_TRUE(throws_error([&] { lm::sum(x, {2}); }, {"sum", "axis 2", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::max(x, {-3}); }, {"max", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::sum(x, {0, -2}); }, {"sum", "twice"}));
  EXPECT_TRUE(throws_error([&] { lm::argmax(x, 2); }, {"argmax", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::argmin(x, -3); }, {"argmin", "out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::mean(x, {5}); }, {"out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::prod(x, {3}); }, {"prod", "out of range"}));
}

}  // namespace
