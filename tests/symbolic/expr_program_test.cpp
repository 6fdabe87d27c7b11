// ExprProgram: the postfix form of an expression with its dims bound, evaluated per index.
#include "symbolic/expr_program.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "symbolic/expr.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;
using namespace luminal::testing;

namespace {

Expr raw(ExprKind k, Expr a, Expr b) { return Expr::raw(k, a, b); }

// p(z) == want(z) and == e.eval(dims, z) for z in [0, n).
void expect_program(const Expr& e, const DimMap& dims, const std::function<int64_t(int64_t)>& want,
                    int n = 200) {
  ExprProgram p(e, dims);
  for (int64_t z = 0; z < n; ++z) {
    ASSERT_EQ(p(z), want(z)) << e.to_string() << " at z=" << z;
    ASSERT_EQ(p(z), e.eval(dims, z)) << e.to_string() << " at z=" << z;
  }
}

int64_t fdiv(int64_t a, int64_t b) { return static_cast<int64_t>(ref_floor_div(a, b)); }
int64_t fmod(int64_t a, int64_t b) { return a - b * fdiv(a, b); }

}  // namespace

TEST(ExprProgram, FullyBoundWithoutIndexIsConstant) {
  Expr a = Expr::var("a"), b = Expr::var("b");
  ExprProgram p(a * 4 + b, {{"a", 2}, {"b", 3}});
  EXPECT_TRUE(p.is_const());
  EXPECT_EQ(p(0), 11);
  EXPECT_EQ(p(12345), 11);
  EXPECT_FALSE(ExprProgram(a + Expr::index(), {{"a", 2}}).is_const());
  EXPECT_TRUE(ExprProgram(Expr(7), {}).is_const());
  // Binding folds the index away when it is multiplied by zero.
  EXPECT_TRUE(ExprProgram(a * Expr::index(), {{"a", 0}}).is_const());
}

TEST(ExprProgram, MatchesHandWrittenIndexFunctions) {
  Expr z = Expr::index(), a = Expr::var("a"), s = Expr::var("s");
  // A permuted/reshaped view index: (z // 8) % 3 * 100 + z % 8 + s
  expect_program((z / 8) % 3 * 100 + z % 8 + s, {{"s", 5}},
                 [](int64_t z) { return (z / 8) % 3 * 100 + z % 8 + 5; });
  // Dim-valued divisors.
  expect_program(z / a * 7 + z % a, {{"a", 6}}, [](int64_t z) { return z / 6 * 7 + z % 6; });
  expect_program(ceil_div(z, a), {{"a", 4}}, [](int64_t z) { return (z + 3) / 4; });
  // Negative intermediates use floor semantics.
  expect_program(raw(ExprKind::FloorDiv, z - 50, 4), {}, [](int64_t z) { return fdiv(z - 50, 4); });
  expect_program(raw(ExprKind::Mod, z - 50, a), {{"a", 7}}, [](int64_t z) { return fmod(z - 50, 7); });
  expect_program(raw(ExprKind::Mod, z, Expr(-3)), {}, [](int64_t z) { return fmod(z, -3); });
  // Padding-style masks.
  expect_program(logical_and(ge(z, s), lt(z, s + 10)), {{"s", 20}},
                 [](int64_t z) { return static_cast<int64_t>(z >= 20 && z < 30); });
  expect_program(min(z, a) + max(z - 100, Expr(0)), {{"a", 50}},
                 [](int64_t z) { return std::min<int64_t>(z, 50) + std::max<int64_t>(z - 100, 0); });
}

TEST(ExprProgram, DeepExpressionsNeedALargerStack) {
  // z // (1 + z // (1 + ... )) nests to the right and does not simplify away, so the operand stack
  // grows with the depth: crosses the 64-entry inline stack.
  Expr z = Expr::index();
  Expr e = z;
  for (int depth = 1; depth <= 90; ++depth) {
    e = raw(ExprKind::FloorDiv, z + depth, raw(ExprKind::Add, Expr(1), e));
    if (depth % 10 == 0 || (depth >= 60 && depth <= 70)) {
      SCOPED_TRACE("depth " + std::to_string(depth));
      ExprProgram p(e, {});
      EXPECT_FALSE(p.is_const());
      for (int64_t i : {0, 1, 7, 100, 1000}) EXPECT_EQ(p(i), e.eval({}, i)) << "z=" << i;
    }
  }
}

TEST(ExprProgram, Errors) {
  Expr z = Expr::index(), a = Expr::var("a");
  EXPECT_THROW(ExprProgram(z + a, {}), Error);  // unbound: at construction
  ExprProgram div(z / a, {{"a", 0}});           // zero divisor: at evaluation
  EXPECT_THROW(div(3), Error);
  ExprProgram mod(Expr(10) % (z - 4), {});
  EXPECT_EQ(mod(7), 1);         // 10 % 3
  EXPECT_THROW(mod(4), Error);  // 10 % 0
  EXPECT_EQ(mod(0), -2);        // 10 % -4 = -2 (sign of the divisor)
  // Extra dims in the map are fine.
  EXPECT_EQ(ExprProgram(z + a, {{"a", 1}, {"unused", 9}})(2), 3);
}

// Regression (simplify_mod, see ExprIdentities.ModuloOfModuloKeepsTheConstant):
// binding a = 1 turns (z + a) % 2 % 2 into ((z + 1) % 2) % 2, which simplifies to z % 2.
TEST(ExprProgram, BindingADimIntoNestedModulo) {
  Expr z = Expr::index(), a = Expr::var("a");
  Expr e = raw(ExprKind::Mod, raw(ExprKind::Mod, z + a, 2), 2);
  ExprProgram p(e, {{"a", 1}});
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(p(i), (i + 1) % 2) << "z=" << i;
  EXPECT_EQ(e.substitute({{"a", Expr(1)}}).eval({}, 0), 1);
}
