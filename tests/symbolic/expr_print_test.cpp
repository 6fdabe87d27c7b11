// to_string() and to_c() text for fixed expressions, pinned.
#include <gtest/gtest.h>

#include "symbolic/expr.h"

using namespace luminal;

namespace {

Expr raw(ExprKind k, Expr a, Expr b) { return Expr::raw(k, a, b); }

struct Syms {
  Expr s = Expr::var("s"), a = Expr::var("a"), b = Expr::var("b"), z = Expr::index();
};

}  // namespace

TEST(ExprPrint, SimplifiedExpressions) {
  Syms v;
  EXPECT_EQ((v.s * 4 + v.z).to_string(), "4*s + z");
  EXPECT_EQ(((v.s * 4 + v.z) / 2).to_string(), "2*s + z // 2");
  EXPECT_EQ((v.z % 8).to_string(), "z % 8");
  EXPECT_EQ((v.z / 8 * 8).to_string(), "8*(z // 8)");
  EXPECT_EQ((v.s - 1).to_string(), "s - 1");
  EXPECT_EQ((v.s - v.z).to_string(), "s - z");
  EXPECT_EQ((v.s - 3 * v.z).to_string(), "s - 3*z");
  EXPECT_EQ((v.z / 4 - 1).to_string(), "z // 4 - 1");
  EXPECT_EQ(ceil_div(v.s, 4).to_string(), "(s + 3) // 4");
  EXPECT_EQ(ceil_div(v.s, v.a).to_string(), "ceildiv(s, a)");
  EXPECT_EQ(min(v.s, v.a).to_string(), "min(a, s)");
  EXPECT_EQ(max(v.a, 4).to_string(), "max(4, a)");
  EXPECT_EQ(lt(v.z, v.s).to_string(), "z < s");
  EXPECT_EQ(ge(v.z, v.s * 2).to_string(), "z >= 2*s");
  EXPECT_EQ(logical_and(lt(v.z, v.s), lt(v.z, v.a)).to_string(), "z < a && z < s");
  EXPECT_EQ(logical_or(lt(v.z, v.s), ge(v.z, v.a)).to_string(), "z < s || z >= a");
  EXPECT_EQ((v.a * v.b * v.z).to_string(), "a*b*z");
  EXPECT_EQ(((v.a + 1) * (v.b + 2)).to_string(), "(a + 1)*(b + 2)");
  EXPECT_EQ((v.z % v.a + 1).to_string(), "z % a + 1");
  EXPECT_EQ((v.z / v.a % v.b).to_string(), "z // a % b");
  EXPECT_EQ(Expr(-5).to_string(), "-5");
}

TEST(ExprPrint, RawTreesGetParenthesesWhereNeeded) {
  Syms v;
  EXPECT_EQ(raw(ExprKind::Mul, raw(ExprKind::Add, v.a, v.b), v.z).to_string(), "(a + b)*z");
  EXPECT_EQ(raw(ExprKind::Add, v.a, raw(ExprKind::Add, v.b, v.z)).to_string(), "a + (b + z)");
  EXPECT_EQ(raw(ExprKind::Add, raw(ExprKind::Add, v.a, v.b), v.z).to_string(), "a + b + z");
  EXPECT_EQ(raw(ExprKind::FloorDiv, v.z, raw(ExprKind::Mul, v.a, v.b)).to_string(), "z // (a*b)");
  EXPECT_EQ(raw(ExprKind::Mod, Expr(-7), Expr(2)).to_string(), "(-7) % 2");
  EXPECT_EQ(raw(ExprKind::Add, v.s, Expr(-3)).to_string(), "s - 3");
  EXPECT_EQ(raw(ExprKind::And, raw(ExprKind::Or, v.a, v.b), v.z).to_string(), "(a || b) && z");
  EXPECT_EQ(raw(ExprKind::Or, raw(ExprKind::And, v.a, v.b), v.z).to_string(), "a && b || z");
  EXPECT_EQ(raw(ExprKind::Lt, raw(ExprKind::Add, v.a, v.b), v.z).to_string(), "a + b < z");
}

TEST(ExprPrint, ShapeList) {
  Expr s = Expr::var("s");
  EXPECT_EQ(to_string(std::vector<Expr>{s, Expr(4096)}), "[s, 4096]");
  EXPECT_EQ(to_string(std::vector<Expr>{}), "[]");
  EXPECT_EQ(to_string(std::vector<Expr>{s * 2 + 1}), "[2*s + 1]");
}

TEST(ExprPrintC, FixedExpressions) {
  Syms v;
  EXPECT_EQ((v.s * 4 + v.z).to_c(), "((4 * s) + z)");
  // Provably non-negative operands with a positive divisor: plain C operators.
  EXPECT_EQ((v.z / 4).to_c(), "(z / 4)");
  EXPECT_EQ((v.z % 8).to_c(), "(z % 8)");
  // A possibly negative operand needs the floor helpers (C's / and % truncate).
  EXPECT_EQ(raw(ExprKind::FloorDiv, v.z - 8, 4).to_c(), "lm_floordiv((z + (-8)), 4)");
  EXPECT_EQ(raw(ExprKind::Mod, v.z - 8, 4).to_c(), "lm_mod((z + (-8)), 4)");
  EXPECT_EQ(raw(ExprKind::FloorDiv, v.z, -4).to_c(), "lm_floordiv(z, (-4))");
  EXPECT_EQ(ceil_div(v.s, v.a).to_c(), "lm_ceildiv(s, a)");
  EXPECT_EQ(min(v.s, v.a).to_c(), "lm_min(a, s)");
  EXPECT_EQ(max(v.s, v.a).to_c(), "lm_max(a, s)");
  EXPECT_EQ(lt(v.z, v.s).to_c(), "(long long)(z < s)");
  EXPECT_EQ(ge(v.z, v.s).to_c(), "(long long)(z >= s)");
  EXPECT_EQ(logical_and(lt(v.z, v.s), lt(v.z, v.a)).to_c(),
            "(long long)((long long)(z < a) && (long long)(z < s))");
  EXPECT_EQ((v.s - 1).to_c(), "(s + (-1))");
}

TEST(ExprPrintC, IndexNameAndLargeConstants) {
  Syms v;
  EXPECT_EQ((2 * v.z + v.s).to_c("idx"), "(s + (2 * idx))");
  EXPECT_EQ((v.z % 8).to_c("threadIdx.x"), "(threadIdx.x % 8)");
  EXPECT_EQ(Expr(int64_t{5000000000}).to_c(), "5000000000LL");
  EXPECT_EQ(Expr(int64_t{-5000000000}).to_c(), "(-5000000000LL)");
  EXPECT_EQ(Expr(2147483647).to_c(), "2147483647");
}

TEST(ExprPrintC, PreludeDefinesTheHelpersOnce) {
  std::string p = Expr::c_prelude();
  for (const char* f : {"lm_floordiv", "lm_mod", "lm_ceildiv", "lm_min", "lm_max"})
    EXPECT_NE(p.find(f), std::string::npos) << f;
  EXPECT_NE(p.find("#ifndef LM_EXPR_PRELUDE"), std::string::npos);  // safe to include twice
}
