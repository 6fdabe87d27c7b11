// Randomised properties of the simplifier: on thousands of seeded random expressions it must
// preserve values (against an independent reference evaluator), be idempotent and not depend on
// the operand order of commutative kinds.
#include <gtest/gtest.h>

#include <iostream>
#include <map>

#include "core/error.h"
#include "symbolic/expr.h"
#include "symbolic/expr_program.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;
using namespace luminal::testing;

namespace {

constexpr int kExprs = 20000;
constexpr int kDepth = 5;
constexpr int kPointsPerExpr = 4;

// Collects the first few failures with full context instead of flooding the log.
struct Failures {
  std::vector<std::string> msgs;
  int count = 0;
  void add(const std::string& m) {
    if (count++ < 15) msgs.push_back(m);
  }
  std::string report() const {
    std::string s = std::to_string(count) + " failure(s); first ones:\n";
    for (const auto& m : msgs) s += "  " + m + "\n";
    return s;
  }
};

// Same tree with every dim renamed (order-preserving: a -> a_<tag>), built raw so no node of the
// copy carries a simplify() memo.
Expr rename_raw(const Expr& e, const std::string& tag) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::Index:
      return e;
    case ExprKind::Var:
      return Expr::var(e.name() + "_" + tag);
    default:
      return Expr::raw(e.kind(), rename_raw(e.lhs(), tag), rename_raw(e.rhs(), tag));
  }
}

// Same tree with the operands of commutative nodes swapped at random (raw).
Expr shuffle_commutative(const Expr& e, std::mt19937& rng) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::Index:
      return e;
    default:
      break;
  }
  Expr a = shuffle_commutative(e.lhs(), rng), b = shuffle_commutative(e.rhs(), rng);
  if (is_commutative(e.kind()) && (rng() & 1)) std::swap(a, b);
  return Expr::raw(e.kind(), a, b);
}

std::string ctx(const Expr& e, const Expr& s, const DimMap& dims, int64_t z) {
  return "expr " + e.to_string() + "  simplified " + s.to_string() + "  at " + dims_to_string(dims, z);
}

// Walks n_exprs random raw expressions and kPointsPerExpr random points each (dims 0..20, z 0..50),
// and wherever the reference value is defined (no zero divisor, no overflow) compares
// check(e, simplified e, dims, z) with it. Returns the number of such points; failures go to `fail`.
template <class F>
int for_each_defined_point(uint32_t seed, int n_exprs, Failures& fail, F&& check) {
  RandomExprGen gen(seed, {"a", "b", "c"});
  int defined = 0;
  for (int i = 0; i < n_exprs; ++i) {
    Expr e = gen.gen(kDepth);
    Expr s;
    try {
      s = e.simplify();
    } catch (const std::exception& ex) {
      fail.add("simplify() threw '" + std::string(ex.what()) + "' for " + e.to_string());
      continue;
    }
    for (int p = 0; p < kPointsPerExpr; ++p) {
      DimMap dims = gen.dims(20);
      int64_t z = gen.uniform(0, 50);
      RefResult ref = ref_eval(e, dims, z);
      if (!ref.ok()) continue;
      ++defined;
      int64_t want = static_cast<int64_t>(ref.value);
      try {
        int64_t got = check(e, s, dims, z);
        if (got != want)
          fail.add("got " + std::to_string(got) + ", want " + std::to_string(want) + ": " +
                   ctx(e, s, dims, z));
      } catch (const std::exception& ex) {
        fail.add("threw '" + std::string(ex.what()) + "', want " + std::to_string(want) + ": " +
                 ctx(e, s, dims, z));
      }
    }
  }
  return defined;
}

// About 87% of the points are defined; these floors guard against a degenerate generator.
constexpr int kMinDefinedPoints = 50000;  // of kExprs * kPointsPerExpr = 80000
// Binding dims builds fresh nodes for every point, which is slower: fewer expressions there.
constexpr int kBindingExprs = 8000;
constexpr int kMinBindingPoints = 20000;  // of 32000

}  // namespace

TEST(ExprRandom, RawEvalMatchesReferenceIncludingDivisionByZero) {
  RandomExprGen gen(99u, {"a", "b", "c"});
  Failures fail;
  int compared = 0, div0 = 0;
  for (int i = 0; i < kExprs; ++i) {
    Expr e = gen.gen(kDepth);
    for (int p = 0; p < kPointsPerExpr; ++p) {
      DimMap dims = gen.dims(20);
      int64_t z = gen.uniform(0, 50);
      RefResult ref = ref_eval(e, dims, z);
      if (ref.overflow) continue;
      std::optional<int64_t> got;
      try {
        got = e.eval(dims, z);
      } catch (const Error&) {
      }
      std::string at = e.to_string() + " at " + dims_to_string(dims, z);
      if (ref.div_by_zero) {
        ++div0;
        if (got) fail.add("eval() gave " + std::to_string(*got) + " despite a zero divisor: " + at);
      } else {
        ++compared;
        if (!got || *got != static_cast<int64_t>(ref.value))
          fail.add("eval() " + (got ? std::to_string(*got) : std::string("threw")) + " != reference " +
                   std::to_string(static_cast<int64_t>(ref.value)) + ": " + at);
      }
    }
  }
  std::cout << "[ random ] " << compared << " values compared, " << div0 << " zero-divisor points\n";
  EXPECT_EQ(fail.count, 0) << fail.report();
  EXPECT_GE(compared, kMinDefinedPoints);
  EXPECT_GE(div0, 1000);  // the error path is exercised too
}

TEST(ExprRandom, SimplifyPreservesValues) {
  Failures fail;
  int n = for_each_defined_point(
      20240611u, kExprs, fail,
      [](const Expr&, const Expr& s, const DimMap& d, int64_t z) { return s.eval(d, z); });
  std::cout << "[ random ] " << n << " points compared\n";
  EXPECT_EQ(fail.count, 0) << fail.report();
  EXPECT_GE(n, kMinDefinedPoints);
}

// Regression (simplify_mod, see ExprIdentities.ModuloOfModuloKeepsTheConstant):
// binding dims to constants creates ((x + c) % k) % k, which loses c. Fails at e.g.
// (z + min(-3, c)) // 16 % b % 2 with b=2, c=19, z=6: want 0, ExprProgram gives 1.
// Re-enable when fixed.
TEST(ExprRandom, ExprProgramMatchesReference) {
  Failures fail;
  int n = for_each_defined_point(
      20240612u, kBindingExprs, fail, [](const Expr& e, const Expr& s, const DimMap& d, int64_t z) {
        int64_t from_raw = ExprProgram(e, d)(z);
        int64_t from_simplified = ExprProgram(s, d)(z);
        if (from_raw != from_simplified)
          throw std::runtime_error("ExprProgram(raw) " + std::to_string(from_raw) +
                                   " != ExprProgram(simplified) " + std::to_string(from_simplified));
        return from_raw;
      });
  EXPECT_EQ(fail.count, 0) << fail.report();
  EXPECT_GE(n, kMinBindingPoints);
}

// Regression: same cause as ExprProgramMatchesReference.
TEST(ExprRandom, SubstitutingEveryDimAndTheIndexFoldsToTheValue) {
  Failures fail;
  int n = for_each_defined_point(
      20240613u, kBindingExprs, fail, [](const Expr& e, const Expr&, const DimMap& d, int64_t z) {
        std::map<std::string, Expr> bind;
        for (auto& [k, v] : d) bind.emplace(k, Expr(v));
        Expr folded = e.substitute(bind).substitute_index(Expr(z));
        if (!folded.is_const()) throw std::runtime_error("did not fold to a constant: " + folded.to_string());
        return folded.value();
      });
  EXPECT_EQ(fail.count, 0) << fail.report();
  EXPECT_GE(n, kMinBindingPoints);
}

TEST(ExprRandom, SimplifyIsIdempotent) {
  RandomExprGen gen(777u, {"a", "b", "c"});
  Failures fail;
  for (int i = 0; i < 5000; ++i) {
    Expr e = gen.gen(kDepth);
    Expr s = e.simplify();
    if (s.simplify() != s)
      fail.add(e.to_string() + " -> " + s.to_string() + " -> " + s.simplify().to_string());
    // simplify() memoises "already simple" on its result, which would hide a non-fixpoint. A copy
    // with renamed dims has no memo, so simplifying it re-runs every rule on the simplified form.
    Expr fresh = rename_raw(s, "r" + std::to_string(i));
    Expr again = fresh.simplify();
    if (again != fresh)
      fail.add("not a fixpoint: " + e.to_string() + " -> " + s.to_string() + ", re-simplified (renamed) -> " +
               again.to_string());
  }
  EXPECT_EQ(fail.count, 0) << fail.report();
}

TEST(ExprRandom, SimplifyIgnoresOperandOrderOfCommutativeKinds) {
  RandomExprGen gen(4242u, {"a", "b", "c"});
  Failures fail;
  for (int i = 0; i < 5000; ++i) {
    Expr e = gen.gen(kDepth);
    Expr swapped = shuffle_commutative(e, gen.rng());
    if (e.simplify() != swapped.simplify())
      fail.add(e.to_string() + " -> " + e.simplify().to_string() + "  but  " + swapped.to_string() + " -> " +
               swapped.simplify().to_string());
  }
  EXPECT_EQ(fail.count, 0) << fail.report();
}

TEST(ExprRandom, ReferenceEvaluatorMatchesHandComputedFloorSemantics) {
  // Guard for the guard: the reference itself, on numbers worked out by hand.
  EXPECT_EQ(static_cast<int64_t>(ref_floor_div(-7, 2)), -4);
  EXPECT_EQ(static_cast<int64_t>(ref_floor_div(7, -2)), -4);
  EXPECT_EQ(static_cast<int64_t>(ref_floor_div(-7, -2)), 3);
  EXPECT_EQ(static_cast<int64_t>(ref_floor_div(6, 3)), 2);
  EXPECT_EQ(static_cast<int64_t>(ref_floor_div(-6, 3)), -2);
  EXPECT_EQ(static_cast<int64_t>(ref_ceil_div(7, 2)), 4);
  EXPECT_EQ(static_cast<int64_t>(ref_ceil_div(-7, 2)), -3);
  EXPECT_EQ(static_cast<int64_t>(ref_ceil_div(7, -2)), -3);
  EXPECT_EQ(static_cast<int64_t>(ref_ceil_div(-7, -2)), 4);
  EXPECT_EQ(static_cast<int64_t>(ref_ceil_div(6, 3)), 2);
  Expr m = Expr::raw(ExprKind::Mod, Expr(-7), Expr(2));
  EXPECT_EQ(static_cast<int64_t>(ref_eval(m, {}, 0).value), 1);
  m = Expr::raw(ExprKind::Mod, Expr(7), Expr(-2));
  EXPECT_EQ(static_cast<int64_t>(ref_eval(m, {}, 0).value), -1);
}
