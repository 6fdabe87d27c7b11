// range_of(): hand-computed bounds for fixed cases, and soundness (every value lies inside the
// range) on random expressions.
#include <gtest/gtest.h>

#include <iostream>

#include "symbolic/expr.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;
using namespace luminal::testing;

namespace {

constexpr std::optional<int64_t> kInf = std::nullopt;

std::string range_text(const ExprRange& r) {
  return "[" + (r.lo ? std::to_string(*r.lo) : "-inf") + ", " + (r.hi ? std::to_string(*r.hi) : "inf") + "]";
}

void expect_range(const Expr& e, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  ExprRange r = range_of(e);
  EXPECT_TRUE(r.lo == lo && r.hi == hi) << e.to_string() << ": got " << range_text(r) << ", want "
                                         << range_text({lo, hi});
}

Expr raw(ExprKind k, Expr a, Expr b) { return Expr::raw(k, a, b); }

}  // namespace

TEST(ExprRange, Leaves) {
  expect_range(Expr(5), 5, 5);
  expect_range(Expr(-3), -3, -3);
  expect_range(Expr::var("s"), 0, kInf);  // dims are >= 0
  expect_range(Expr::index(), 0, kInf);
}

TEST(ExprRange, HandComputedBounds) {
  Expr s = Expr::var("s"), z = Expr::index();
  expect_range(z % 8, 0, 7);
  expect_range(z / 4, 0, kInf);
  expect_range(s - 1, -1, kInf);
  expect_range(min(s, 7), 0, 7);
  expect_range(max(s, 7), 7, kInf);
  expect_range(lt(s, z), 0, 1);
  expect_range(logical_or(lt(s, z), ge(s, 3)), 0, 1);
  expect_range(3 * (z % 8) - 2, -2, 19);                      // 3*[0,7] - 2
  expect_range(raw(ExprKind::Mul, s, -2), kInf, 0);            // -2 * [0, inf)
  expect_range(raw(ExprKind::FloorDiv, -7, 2), -4, -4);
  expect_range(raw(ExprKind::CeilDiv, z % 8, 3), 0, 3);        // ceil([0,7] / 3)
  expect_range(raw(ExprKind::FloorDiv, z % 8 - 5, 2), -3, 1);  // floor([-5,2] / 2)
  expect_range(raw(ExprKind::Mul, z % 4, z % 8), 0, 21);       // [0,3] * [0,7]
  expect_range(raw(ExprKind::Mul, z % 4 - 2, z % 8), -14, 7);  // [-2,1] * [0,7]
  expect_range(raw(ExprKind::Mod, z % 4, 8), 0, 3);            // below the divisor already
  expect_range(raw(ExprKind::Min, z % 4 - 2, s), -2, 1);
  expect_range(raw(ExprKind::Max, z % 4 - 2, s), 0, kInf);
  expect_range(z % 8 + z % 4, 0, 10);
}

TEST(ExprRange, RandomValuesLieInsideTheRange) {
  RandomExprGen gen(31337u, {"a", "b", "c"});
  int checked = 0, bounded = 0;
  std::vector<std::string> bad;
  for (int i = 0; i < 10000; ++i) {
    Expr e = gen.gen(5);
    for (const Expr& x : {e, e.simplify()}) {
      ExprRange r = range_of(x);
      if (r.lo && r.hi) ++bounded;
      for (int p = 0; p < 3; ++p) {
        DimMap d = gen.dims(20);
        int64_t z = gen.uniform(0, 50);
        RefResult v = ref_eval(x, d, z);
        if (!v.ok()) continue;
        ++checked;
        if ((r.lo && v.value < *r.lo) || (r.hi && v.value > *r.hi))
          if (bad.size() < 10)
            bad.push_back(x.to_string() + " = " + std::to_string(static_cast<int64_t>(v.value)) + " at " +
                          dims_to_string(d, z) + " outside " + range_text(r));
      }
    }
  }
  std::cout << "[ range ] " << checked << " values checked, " << bounded << " bounded ranges\n";
  EXPECT_TRUE(bad.empty()) << [&] {
    std::string s;
    for (auto& b : bad) s += "  " + b + "\n";
    return s;
  }();
  EXPECT_GE(checked, 30000);
  EXPECT_GE(bounded, 2000);  // not vacuous: many ranges are finite on both ends
}
