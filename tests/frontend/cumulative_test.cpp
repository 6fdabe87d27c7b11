// cumsum / cumprod / cummax against sequential scans.
#include "frontend/ref_tensor.h"

namespace {

using namespace reft;
namespace lm = luminal;
using Lane = std::vector<double>;

Lane scan_sum(const Lane& v) {
  Lane r;
  double acc = 0;
  for (double x : v) r.push_back(acc += x);
  return r;
}
Lane scan_prod(const Lane& v) {
  Lane r;
  double acc = 1;
  for (double x : v) r.push_back(acc *= x);
  return r;
}
Lane scan_max(const Lane& v) {  // NaN, once seen, stays (torch.cummax)
  Lane r;
  double acc = -kInf;
  for (double x : v) r.push_back(acc = (std::isnan(acc) || std::isnan(x)) ? kNaN : std::max(acc, x));
  return r;
}

using Op = Tensor (*)(const Tensor&, int);

Buffer run1(const Ref& x, DType t, Op op, int axis) {
  Case c;
  return c.run(op(c.in("x", x, t), axis));
}

TEST(CumulativeScan, F32AlongEachAxis) {
  Ref x2 = ramp({3, 4}, 0.5, 9, -1.5);
  Ref x3 = ramp({2, 3, 4}, 0.5, 7, -1.0);
  for (int axis : {0, 1, -1}) {
    EXPECT_TRUE(same(along(x2, axis, scan_sum), run1(x2, DType::F32, lm::cumsum, axis), DType::F32)) << axis;
    EXPECT_TRUE(same(along(x2, axis, scan_prod), run1(x2, DType::F32, lm::cumprod, axis), DType::F32)) << axis;
    EXPECT_TRUE(same(along(x2, axis, scan_max), run1(x2, DType::F32, lm::cummax, axis), DType::F32)) << axis;
  }
  for (int axis : {0, 1, 2}) {
    EXPECT_TRUE(same(along(x3, axis, scan_sum), run1(x3, DType::F32, lm::cumsum, axis))) << axis;
    EXPECT_TRUE(same(along(x3, axis, scan_prod), run1(x3, DType::F32, lm::cumprod, axis))) << axis;
    EXPECT_TRUE(same(along(x3, axis, scan_max), run1(x3, DType::F32, lm::cummax, axis))) << axis;
  }
}

TEST(CumulativeScan, HandChecked) {
  Ref m({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(same(Ref({2, 3}, {1, 3, 6, 4, 9, 15}), run1(m, DType::F32, lm::cumsum, 1)));
  EXPECT_TRUE(same(Ref({2, 3}, {1, 2, 3, 5, 7, 9}), run1(m, DType::F32, lm::cumsum, 0)));
  EXPECT_TRUE(same(Ref({2, 3}, {1, 2, 6, 4, 20, 120}), run1(m, DType::F32, lm::cumprod, 1)));
  EXPECT_TRUE(same(Ref({5}, {-1, 2, 2, 5, 5}), run1(Ref({5}, {-1, 2, 0, 5, 3}), DType::F32, lm::cummax, 0)));
}

TEST(CumulativeScan, Infinities) {
  EXPECT_TRUE(same(Ref({3}, {1, kInf, kInf}), run1(Ref({3}, {1, kInf, 2}), DType::F32, lm::cumsum, 0)));
  EXPECT_TRUE(same(Ref({4}, {-kInf, -kInf, 3, 3}), run1(Ref({4}, {-kInf, -kInf, 3, -kInf}), DType::F32, lm::cummax, 0)));
  EXPECT_TRUE(same(Ref({3}, {-kInf, -kInf, -kInf}), run1(Ref({3}, {-kInf, -kInf, -kInf}), DType::F32, lm::cummax, 0)));
  EXPECT_TRUE(same(Ref({3}, {2, kInf, -kInf}), run1(Ref({3}, {2, kInf, -1}), DType::F32, lm::cumprod, 0)));
  // inf - inf = NaN, and NaN stays for the rest of the scan (as a sequential scan would).
  Ref x({2, 4}, {1, kInf, -kInf, 2, kNaN, 1, 2, 3});
  EXPECT_TRUE(same(along(x, 1, scan_sum), run1(x, DType::F32, lm::cumsum, 1)));
  EXPECT_TRUE(same(along(x, 1, scan_max), run1(x, DType::F32, lm::cummax, 1)));
  EXPECT_TRUE(same(along(x, 0, scan_sum), run1(x, DType::F32, lm::cumsum, 0)));
}

TEST(CumulativeScan, IntAndBool) {
  const double lo = -2147483648.0, hi = 2147483647.0;
  Ref xi({2, 4}, {hi, 1, 1, -5, lo, lo, -3, 7});
  Case c;
  Tensor t = c.in("x", xi, DType::I32);
  lm::cumsum(t, 1).output("s");
  lm::cummax(t, 1).output("m");
  lm::cumprod(t, 0).output("p");
  Interpreter rt = c.run_all();
  EXPECT_TRUE(same(Ref({2, 4}, {hi, lo, lo + 1, lo - 4 + 4294967296.0, lo, 0, -3, 4}), rt.output("s"), DType::I32));
  EXPECT_TRUE(same(Ref({2, 4}, {hi, hi, hi, hi, lo, lo, -3, 7}), rt.output("m"), DType::I32));
  EXPECT_TRUE(same(Ref({2, 4}, {hi, 1, 1, -5, lo, lo, -3, -35}), rt.output("p"), DType::I32));  // hi*lo wraps to lo

  Ref xb({2, 5}, {1, 0, 1, 1, 0, 0, 0, 1, 0, 1});
  Case cb;
  Tensor tb = cb.in("b", xb, DType::Bool);
  lm::cumsum(tb, 1).output("s");
  lm::cumsum(tb, 0).output("s0");
  lm::cummax(tb, 1).output("m");
  lm::cumprod(tb, 1).output("p");
  Interpreter rb = cb.run_all();
  EXPECT_TRUE(same(Ref({2, 5}, {1, 1, 2, 3, 3, 0, 0, 1, 1, 2}), rb.output("s"), DType::I32));
  EXPECT_TRUE(same(Ref({2, 5}, {1, 0, 1, 1, 0, 1, 0, 2, 1, 1}), rb.output("s0"), DType::I32));
  EXPECT_TRUE(same(Ref({2, 5}, {1, 1, 1, 1, 1, 0, 0, 1, 1, 1}), rb.output("m"), DType::Bool));
  EXPECT_TRUE(same(Ref({2, 5}, {1, 0, 0, 0, 0, 0, 0, 0, 0, 0}), rb.output("p"), DType::I32));
}

TEST(CumulativeScan, SymbolicAxisLength) {
  Expr n = Expr::var("n");
  Case c;
  Tensor x = c.in("x", Ref({2, 1}, {0, 0}), DType::F32, {2, n});
  Tensor y = c.in("y", Ref({1, 2}, {0, 0}), DType::F32, {n, 2});
  Tensor xi = c.in("xi", Ref({1}, {0}), DType::I32, {n});
  lm::cumsum(x, 1).output("sum");
  lm::cummax(x, -1).output("max");
  lm::cumprod(x, 1).output("prod");
  lm::cumsum(y, 0).output("sum0");
  lm::cummax(y, 0).output("max0");
  lm::cumsum(xi, 0).output("isum");
  lm::cumprod(xi, 0).output("iprod");
  for (int64_t len : {1, 3, 4}) {
    Ref xv = make({2, len}, [](const Idx& q) { return q[0] == 1 && q[1] == 2 ? 0.0 : (q[1] % 2 ? -1.5 : 2.0) + q[0]; });
    Ref yv = ramp({len, 2});
    Ref iv = make({len}, [](const Idx& q) { return q[0] % 2 ? -3.0 : 2.0; });
    c.set("x", xv, DType::F32);
    c.set("y", yv, DType::F32);
    c.set("xi", iv, DType::I32);
    Interpreter rt = c.run_all();
    std::string ctx = "n=" + std::to_string(len);
    EXPECT_TRUE(same(along(xv, 1, scan_sum), rt.output("sum"))) << ctx;
    EXPECT_TRUE(same(along(xv, 1, scan_max), rt.output("max"))) << ctx;
    EXPECT_TRUE(near(along(xv, 1, scan_prod), rt.output("prod"), 1e-5, 0)) << ctx;
    EXPECT_TRUE(same(along(yv, 0, scan_sum), rt.output("sum0"))) << ctx;
    EXPECT_TRUE(same(along(yv, 0, scan_max), rt.output("max0"))) << ctx;
    EXPECT_TRUE(same(along(iv, 0, scan_sum), rt.output("isum"), DType::I32)) << ctx;
    EXPECT_TRUE(same(along(iv, 0, scan_prod), rt.output("iprod"), DType::I32)) << ctx;
  }
}

TEST(CumulativeScan, OfViews) {
  Ref x = ramp({3, 4});
  Case c;
  Tensor t = c.in("x", x);
  EXPECT_TRUE(same(along(flip(transpose(x, 0, 1), {1}), 1, scan_sum),
                   c.run(lm::cumsum(lm::flip(lm::transpose(t, 0, 1), {1}), 1))));
  Case c2;
  Tensor t2 = c2.in("x", x);
  Ref padded = pad(x, {{0, 0}, {1, 1}}, 7);
  EXPECT_TRUE(same(along(padded, 1, scan_sum), c2.run(lm::cumsum(lm::pad(t2, {{0, 0}, {1, 1}}, 7), 1))));
}

TEST(CumulativeErrors, Axis) {
  Graph g;
  Tensor x = lm::input(g, "x", DType::F32, {2, 3});
  EXPECT_TRUE(throws_error([&] { lm::cumsum(x, 2); }, {"out of range"}));
  EXPECT_TRUE(throws_error([&] { lm::cummax(x, -3); }, {"out of range"}));
}

}  // namespace
