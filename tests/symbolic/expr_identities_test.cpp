// The simplifier's documented identities, one idea per test, plus the small API around them
// (substitute, dims, errors, names). Expected values are worked out by hand.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "symbolic/expr.h"
#include "symbolic/expr_program.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;

namespace {

Expr raw(ExprKind k, Expr a, Expr b) { return Expr::raw(k, a, b); }

struct Syms {
  Expr s = Expr::var("s"), a = Expr::var("a"), b = Expr::var("b"), x = Expr::var("x"), z = Expr::index();
};

// The message of the Error that f() throws ("" if it throws nothing or something else).
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (...) {
    return "<not a luminal::Error>";
  }
  return "";
}

}  // namespace

TEST(ExprIdentities, ConstantFolding) {
  EXPECT_EQ(Expr(3) + Expr(4), Expr(7));
  EXPECT_EQ(Expr(3) * Expr(-4), Expr(-12));
  EXPECT_EQ(Expr(3) - Expr(10), Expr(-7));
  EXPECT_EQ(Expr(17) / Expr(5), Expr(3));
  EXPECT_EQ(Expr(17) % Expr(5), Expr(2));
  EXPECT_EQ(ceil_div(Expr(17), Expr(5)), Expr(4));
  EXPECT_EQ(min(Expr(3), Expr(-2)), Expr(-2));
  EXPECT_EQ(max(Expr(3), Expr(-2)), Expr(3));
  EXPECT_EQ(lt(Expr(3), Expr(4)), Expr(1));
  EXPECT_EQ(lt(Expr(4), Expr(4)), Expr(0));
  EXPECT_EQ(ge(Expr(4), Expr(4)), Expr(1));
  EXPECT_EQ(logical_and(Expr(2), Expr(-1)), Expr(1));
  EXPECT_EQ(logical_and(Expr(2), Expr(0)), Expr(0));
  EXPECT_EQ(logical_or(Expr(0), Expr(0)), Expr(0));
  EXPECT_EQ(logical_or(Expr(0), Expr(5)), Expr(1));
  // A whole raw tree of constants: ((2 + 3) * 4 - 6) // 4 % 3 = (14 // 4) % 3 = 0
  Expr t = raw(ExprKind::Mod,
               raw(ExprKind::FloorDiv,
                   raw(ExprKind::Add, raw(ExprKind::Mul, raw(ExprKind::Add, 2, 3), 4), -6), 4),
               3);
  EXPECT_EQ(t.simplify(), Expr(0));
  // Constants inside a sum are gathered into one: (s + 3) + (2 - s) + 1 = 6
  Syms v;
  EXPECT_EQ((v.s + 3) + (2 - v.s) + 1, Expr(6));
}

TEST(ExprIdentities, FloorSemanticsWithNegatives) {
  // (-7)/2 = -3.5 -> -4; the modulo takes the divisor's sign; ceil rounds up.
  struct Case {
    ExprKind k;
    int64_t a, b, want;
  } cases[] = {
      {ExprKind::FloorDiv, -7, 2, -4}, {ExprKind::FloorDiv, 7, -2, -4}, {ExprKind::FloorDiv, -7, -2, 3},
      {ExprKind::FloorDiv, -8, 2, -4}, {ExprKind::FloorDiv, 7, 2, 3},   {ExprKind::Mod, -7, 2, 1},
      {ExprKind::Mod, 7, -2, -1},      {ExprKind::Mod, -7, -2, -1},     {ExprKind::Mod, -8, 4, 0},
      {ExprKind::CeilDiv, 7, 2, 4},    {ExprKind::CeilDiv, -7, 2, -3},  {ExprKind::CeilDiv, 7, -2, -3},
      {ExprKind::CeilDiv, -7, -2, 4},  {ExprKind::CeilDiv, 8, 2, 4},
  };
  for (const auto& c : cases) {
    Expr e = raw(c.k, Expr(c.a), Expr(c.b));
    SCOPED_TRACE(e.to_string());
    EXPECT_EQ(e.eval({}), c.want);                 // the evaluator
    EXPECT_EQ(e.simplify(), Expr(c.want));          // constant folding
    EXPECT_EQ(ExprProgram(e, {})(0), c.want);       // the postfix program
    // and with a symbolic operand that is only bound at evaluation time
    Expr sym = raw(c.k, Expr::var("n"), Expr(c.b));
    EXPECT_EQ(sym.eval({{"n", c.a}}), c.want);
    EXPECT_EQ(sym.simplify().eval({{"n", c.a}}), c.want);
  }
}

TEST(ExprIdentities, CanonicalOrderOfCommutativeTerms) {
  Syms v;
  EXPECT_EQ(v.a + v.b, v.b + v.a);
  EXPECT_EQ(v.a * v.b, v.b * v.a);
  EXPECT_EQ(min(v.a, v.b), min(v.b, v.a));
  EXPECT_EQ(max(v.a, v.b), max(v.b, v.a));
  EXPECT_EQ(logical_and(v.a, v.b), logical_and(v.b, v.a));
  EXPECT_EQ(logical_or(v.a, v.b), logical_or(v.b, v.a));
  EXPECT_EQ((v.a + v.b) + v.z, v.a + (v.z + v.b));
  EXPECT_EQ((v.a * v.b) * v.z, v.z * (v.b * v.a));
  EXPECT_EQ(2 * v.a + 3 * v.b + v.a, 3 * (v.a + v.b));
  EXPECT_EQ(v.a * 6, 2 * (3 * v.a));
  EXPECT_EQ((v.a - v.b) + (v.b - v.a), Expr(0));
  // Non-commutative kinds keep their order.
  EXPECT_NE(v.a / v.b, v.b / v.a);
  EXPECT_NE(v.a % v.b, v.b % v.a);
  EXPECT_NE(lt(v.a, v.b), lt(v.b, v.a));
}

TEST(ExprIdentities, NeutralAndAbsorbingElements) {
  Syms v;
  for (Expr x : {v.s, v.z, v.a * v.b, v.z % 8, min(v.a, v.b)}) {
    SCOPED_TRACE(x.to_string());
    EXPECT_EQ(x * 1, x);
    EXPECT_EQ(1 * x, x);
    EXPECT_EQ(x + 0, x);
    EXPECT_EQ(0 + x, x);
    EXPECT_EQ(x * 0, Expr(0));
    EXPECT_EQ(0 * x, Expr(0));
    EXPECT_EQ(x - x, Expr(0));
    EXPECT_EQ(x / 1, x);
    EXPECT_EQ(x % 1, Expr(0));
    EXPECT_EQ(x / x, Expr(1));
    EXPECT_EQ(x % x, Expr(0));
    EXPECT_EQ(raw(ExprKind::Mul, x, 1).simplify(), x);
    EXPECT_EQ(raw(ExprKind::Add, 0, x).simplify(), x);
  }
}

TEST(ExprIdentities, DivisionUndoesMultiplication) {
  Syms v;
  EXPECT_EQ((v.x * 4) / 4, v.x);
  EXPECT_EQ((v.x * v.a) / v.a, v.x);
  EXPECT_EQ((v.a * v.x) / v.a, v.x);
  EXPECT_EQ((v.x * v.a * v.b) / v.a, v.x * v.b);
  EXPECT_EQ((v.x * v.a * 6) / (v.a * 3), 2 * v.x);
  EXPECT_EQ(ceil_div(v.x * v.a, v.a), v.x);
  EXPECT_EQ(ceil_div(v.x * 8, 8), v.x);
  EXPECT_EQ((6 * v.z + 4) / 2, 3 * v.z + 2);
  // A constant part below the divisor drops out: (4z + 3) // 4 = z
  EXPECT_EQ((4 * v.z + 3) / 4, v.z);
  // ...and whole multiples of the divisor leave it: (4z + 5) // 4 = z + 1 + 1 // 4 = z + 1
  EXPECT_EQ((4 * v.z + 5) / 4, v.z + 1);
  EXPECT_EQ((v.x * 4) / 8, v.x / 2);  // gcd reduction
  EXPECT_NE((v.x * 4) / 8, v.x);       // not everything collapses
  // a constant factor common to both sides cancels, the divisor symbolic
  EXPECT_EQ((128 * v.x) / (128 * v.a), v.x / v.a);
  EXPECT_EQ((6 * v.x + 4) / (2 * v.a + 2 * v.b), (3 * v.x + 2) / (v.a + v.b));
  EXPECT_NE((6 * v.x + 3) / (2 * v.a), (3 * v.x + 1) / v.a);  // 3 is not a multiple of 2
}

TEST(ExprIdentities, ModuloOfModulo) {
  Syms v;
  EXPECT_EQ((v.x % v.a) % v.a, v.x % v.a);
  EXPECT_EQ((v.z % 4) % 4, v.z % 4);
  EXPECT_EQ((v.z % 8) % 4, v.z % 4);      // the inner mod is a multiple of the outer
  EXPECT_EQ((v.z % 4) % 8, v.z % 4);      // already below 8
  EXPECT_EQ((v.x * v.a) % v.a, Expr(0));
  EXPECT_EQ((4 * v.z + 6) % 4, Expr(2));       // multiples of 4 drop out; 6 % 4 = 2
  EXPECT_EQ((2 * v.z) % 4, 2 * (v.z % 2));     // gcd reduction
}

// Regression (simplify_mod): dropping an inner mod by a multiple of k used to lose the constant
// of its operand, so ((z + 1) % 2) % 2 simplified to z % 2.
TEST(ExprIdentities, ModuloOfModuloKeepsTheConstant) {
  Syms v;
  EXPECT_EQ(((v.z + 1) % 2) % 2, (v.z + 1) % 2);
  EXPECT_EQ(((v.z + 3) % 8) % 4, (v.z + 3) % 4);
  Expr e = raw(ExprKind::Mod, raw(ExprKind::Mod, v.z + 1, 2), 2);
  EXPECT_EQ(e.eval({}, 0), 1);
  EXPECT_EQ(e.simplify().eval({}, 0), 1);
  // Constant operand, symbolic inner divisor: (-3) % (2z) % 2 at z = 9 is 15 % 2 = 1.
  Expr f = raw(ExprKind::Mod, raw(ExprKind::Mod, -3, 2 * v.z), 2);
  EXPECT_EQ(f.eval({}, 9), 1);
  EXPECT_EQ(f.simplify().eval({}, 9), 1);
}

TEST(ExprIdentities, MinMaxOfProvablyOrderedTerms) {
  Syms v;
  EXPECT_EQ(min(v.s, v.s + 3), v.s);
  EXPECT_EQ(max(v.s, v.s + 3), v.s + 3);
  EXPECT_EQ(min(v.s + 3, v.s), v.s);
  EXPECT_EQ(max(v.s - 1, v.s), v.s);
  EXPECT_EQ(max(v.z, 0), v.z);             // the index is >= 0
  EXPECT_EQ(min(v.z % 8, 8), v.z % 8);     // z % 8 <= 7
  EXPECT_EQ(max(v.z % 8, 7), Expr(7));
  EXPECT_EQ(min(v.s, v.s), v.s);
  // Not provable either way: kept, in canonical order.
  Expr m = min(v.a, v.b);
  EXPECT_EQ(m.kind(), ExprKind::Min);
  EXPECT_EQ(min(v.s, 5).kind(), ExprKind::Min);
}

TEST(ExprIdentities, ModPlusScaledDivRecombines) {
  Syms v;
  EXPECT_EQ(v.z % 8 + 8 * (v.z / 8), v.z);
  EXPECT_EQ(8 * (v.z / 8) + v.z % 8, v.z);
  EXPECT_EQ(v.x % v.a + v.a * (v.x / v.a), v.x);
  EXPECT_EQ(3 * (v.z % 8) + 24 * (v.z / 8), 3 * v.z);
  EXPECT_EQ(v.z % 8 + 8 * (v.z / 8) + v.s, v.s + v.z);
  // Two levels, as in a reshaped view's index.
  EXPECT_EQ(((v.z / 32) % 4) * 32 + (v.z / 128) * 128 + v.z % 32, v.z);
  // Mismatched coefficients do not recombine.
  EXPECT_NE(v.z % 8 + 4 * (v.z / 8), v.z);
}

TEST(ExprIdentities, NestedFloorDivisions) {
  Syms v;
  EXPECT_EQ(v.z / 4 / 8, v.z / 32);
  EXPECT_EQ((v.z / 4) / 8, v.z / 32);
  EXPECT_EQ((v.z / v.a) / v.b, v.z / (v.a * v.b));
  EXPECT_EQ((v.z % 32) / 8, (v.z / 8) % 4);  // (x % (q*k)) / k = (x / k) % q
  EXPECT_EQ((2 * v.z + 2) / 4, (v.z + 1) / 2);  // gcd reduction
  EXPECT_EQ(ceil_div(v.z, 4), (v.z + 3) / 4);
}

TEST(ExprIdentities, ComparisonsFoldWhenProvable) {
  Syms v;
  EXPECT_EQ(lt(v.s, v.s + 1), Expr(1));
  EXPECT_EQ(ge(v.s, v.s + 1), Expr(0));
  EXPECT_EQ(ge(v.s + 1, v.s + 1), Expr(1));
  EXPECT_EQ(lt(v.z % 4, 4), Expr(1));
  EXPECT_EQ(ge(v.z % 4, 4), Expr(0));
  EXPECT_EQ(ge(v.z, 0), Expr(1));
  EXPECT_EQ(lt(v.z, 0), Expr(0));
  EXPECT_EQ(lt(min(v.s, 3), 4), Expr(1));
  // Unknown outcomes stay comparisons.
  EXPECT_EQ(lt(v.a, v.b).kind(), ExprKind::Lt);
  EXPECT_EQ(lt(v.z % 4, 3).kind(), ExprKind::Lt);
  EXPECT_EQ(ge(v.s, 1).kind(), ExprKind::Ge);
  // Logic with a known side.
  Expr c = lt(v.z, v.s);
  EXPECT_EQ(logical_and(c, 1), c);
  EXPECT_EQ(logical_and(c, 0), Expr(0));
  EXPECT_EQ(logical_or(c, 0), c);
  EXPECT_EQ(logical_or(c, 7), Expr(1));
  EXPECT_EQ(logical_and(c, c), c);
  // and(1, s) is not s: s is not 0/1-valued.
  EXPECT_NE(logical_and(v.s, 1), v.s);
  EXPECT_EQ(logical_and(v.s, 1).eval({{"s", 5}}), 1);
}

TEST(ExprIdentities, Substitute) {
  Syms v;
  Expr e = v.a * 4 + v.b;
  EXPECT_EQ(e.substitute({{"a", Expr(2)}}), v.b + 8);
  EXPECT_EQ(e.substitute({{"a", v.s + 1}}), 4 * v.s + v.b + 4);
  EXPECT_EQ(e.substitute({{"a", Expr(2)}, {"b", Expr(3)}}), Expr(11));
  EXPECT_EQ(e.substitute({{"unused", Expr(2)}}), e);
  EXPECT_EQ(e.substitute({}), e);
  // The result is simplified: z // a with a = 1 is z; (x % a) with a = x*... folds.
  EXPECT_EQ((v.z / v.a).substitute({{"a", Expr(1)}}), v.z);
  EXPECT_EQ((v.z % v.a + v.a * (v.z / v.a)).substitute({{"a", Expr(16)}}), v.z);
  // Substitution is simultaneous, not sequential: a -> b, b -> a swaps.
  EXPECT_EQ((v.a - v.b).substitute({{"a", v.b}, {"b", v.a}}), v.b - v.a);
  // A raw input is simplified on the way out.
  EXPECT_EQ(raw(ExprKind::Add, v.a, raw(ExprKind::Mul, v.b, 0)).substitute({{"a", Expr(1)}}), Expr(1));
}

TEST(ExprIdentities, SubstituteIndex) {
  Syms v;
  Expr e = 2 * v.z + 1;
  EXPECT_EQ(e.substitute_index(Expr(3)), Expr(7));
  EXPECT_EQ(e.substitute_index(v.s), 2 * v.s + 1);
  EXPECT_EQ(e.substitute_index(v.z + 1), 2 * v.z + 3);  // the replacement's own z is not re-substituted
  EXPECT_EQ((v.z % 8).substitute_index(8 * v.s + 3), Expr(3));
  EXPECT_EQ((v.z / 8).substitute_index(8 * v.s + 3), v.s);
  Expr no_index = v.a + v.b;
  EXPECT_FALSE(no_index.uses_index());
  EXPECT_EQ(no_index.substitute_index(Expr(5)), no_index);
  EXPECT_TRUE(e.uses_index());
  EXPECT_FALSE(e.substitute_index(Expr(3)).uses_index());
}

TEST(ExprIdentities, DimsListsEachNameOnceSorted) {
  Syms v;
  Expr c = Expr::var("c");
  EXPECT_EQ((c + v.a * v.z + v.b / v.a + v.a).dims(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Expr(5).dims(), std::vector<std::string>{});
  EXPECT_EQ(v.z.dims(), std::vector<std::string>{});
  EXPECT_EQ(raw(ExprKind::Mul, v.s, 0).dims(), std::vector<std::string>{"s"});  // raw: still there
  EXPECT_EQ((v.s * 0).dims(), std::vector<std::string>{});                        // simplified away
}

TEST(ExprIdentities, ProvablyEqualAndProduct) {
  Syms v;
  EXPECT_TRUE(provably_equal(v.z / 8 * 8 + v.z % 8, v.z));
  EXPECT_TRUE(provably_equal(2 * (v.a + 3), 2 * v.a + 6));
  EXPECT_FALSE(provably_equal(v.s, v.s + 1));
  EXPECT_FALSE(provably_equal(v.a, v.b));
  EXPECT_EQ(product({}), Expr(1));
  EXPECT_EQ(product({v.a, Expr(2), v.b}), 2 * v.a * v.b);
  EXPECT_EQ(product({v.a, Expr(0)}), Expr(0));
}

TEST(ExprErrors, UnboundDimIsNamed) {
  Expr e = Expr::var("seq_len") * 4 + Expr::index();
  std::string msg = error_message([&] { e.eval({{"other", 1}}, 0); });
  EXPECT_NE(msg.find("'seq_len'"), std::string::npos) << msg;
  msg = error_message([&] { ExprProgram(e, {}); });
  EXPECT_NE(msg.find("'seq_len'"), std::string::npos) << msg;
  EXPECT_EQ(e.eval({{"seq_len", 3}}, 5), 17);
}

TEST(ExprErrors, DivisionByZero) {
  Expr a = Expr::var("a"), b = Expr::var("b");
  DimMap d = {{"a", 7}, {"b", 0}};
  for (Expr e : {a / b, a % b, ceil_div(a, b), a / Expr(0), a % Expr(0), ceil_div(a, Expr(0)),
                 Expr(5) / Expr(0), Expr(5) % Expr(0)}) {
    SCOPED_TRACE(e.to_string());
    EXPECT_THROW(e.eval(d), Error);
    EXPECT_THROW(ExprProgram(e, d)(0), Error);
  }
  // Building x / 0 is not an error (the divisor may be a dim bound later); only evaluating is.
  EXPECT_NO_THROW(Expr(5) / Expr(0));
  EXPECT_NE((Expr(5) / Expr(0)).kind(), ExprKind::Const);
  // No short-circuit: a zero divisor anywhere is an error, even under a factor of 0 or an and(0, .).
  EXPECT_THROW(raw(ExprKind::Mul, Expr(0), a / b).eval(d), Error);
  EXPECT_THROW(raw(ExprKind::And, Expr(0), a % b).eval(d), Error);
}

TEST(ExprErrors, VarRejectsInvalidNames) {
  for (const char* bad : {"", "1a", "a-b", "a b", "z", "a.b", "x+", "\xc3\xa9"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(Expr::var(bad), Error);
  }
  for (const char* good : {"a", "_", "_x1", "Z", "zz", "z1", "seq_len", "BATCH"}) {
    SCOPED_TRACE(good);
    EXPECT_NO_THROW(Expr::var(good));
    EXPECT_EQ(Expr::var(good).name(), good);
  }
  std::string msg = error_message([] { Expr::var("z"); });
  EXPECT_NE(msg.find("'z'"), std::string::npos) << msg;
}
