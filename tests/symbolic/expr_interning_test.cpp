// Interning: structurally equal expressions are one node (== is pointer equality), hashes
// follow structure, and the structural order is a consistent total order.
#include <gtest/gtest.h>

#include <thread>
#include <unordered_map>

#include "symbolic/expr.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;
using namespace luminal::testing;

namespace {

// A fixed set of structurally distinct raw expressions.
std::vector<Expr> distinct_exprs() {
  Expr a = Expr::var("a"), b = Expr::var("b"), z = Expr::index();
  std::vector<Expr> leaves = {Expr(0), Expr(1), Expr(-1), Expr(2), a, b, z};
  std::vector<Expr> out = leaves;
  for (ExprKind k : binary_kinds())
    for (const Expr& x : leaves)
      for (const Expr& y : leaves) out.push_back(Expr::raw(k, x, y));
  return out;
}

}  // namespace

TEST(ExprInterning, StructurallyEqualIsSameNode) {
  EXPECT_EQ(Expr::var("seq"), Expr::var("seq"));
  EXPECT_EQ(Expr::index(), Expr::index());
  EXPECT_EQ(Expr(42), Expr(int64_t{42}));
  EXPECT_EQ(Expr(), Expr(0));
  // Built twice from scratch, raw and through the builders.
  auto build_raw = [] {
    return Expr::raw(ExprKind::Add, Expr::raw(ExprKind::Mul, Expr::var("s"), Expr(4)), Expr::index());
  };
  EXPECT_EQ(build_raw(), build_raw());
  EXPECT_EQ(build_raw().node(), build_raw().node());
  auto build = [] { return (Expr::var("s") * 4 + Expr::index()) / 2 % Expr::var("t"); };
  EXPECT_EQ(build(), build());
  EXPECT_EQ(build().hash(), build().hash());
  EXPECT_EQ(std::hash<Expr>()(build()), std::hash<Expr>()(build()));
}

TEST(ExprInterning, DifferentStructureIsDifferentNodeAndHash) {
  std::vector<Expr> xs = distinct_exprs();
  std::unordered_map<uint64_t, Expr> by_hash;
  for (size_t i = 0; i < xs.size(); ++i) {
    for (size_t j = i + 1; j < xs.size(); ++j) ASSERT_NE(xs[i], xs[j]) << xs[i].to_string();
    auto [it, fresh] = by_hash.emplace(xs[i].hash(), xs[i]);
    EXPECT_TRUE(fresh) << "hash collision: " << xs[i].to_string() << " and " << it->second.to_string();
  }
  EXPECT_EQ(xs.size(), 7u + 11u * 49u);
  // Operand order is structure for raw nodes, even of commutative kinds.
  Expr a = Expr::var("a"), b = Expr::var("b");
  EXPECT_NE(Expr::raw(ExprKind::Add, a, b), Expr::raw(ExprKind::Add, b, a));
  EXPECT_NE(Expr::raw(ExprKind::Add, a, b).hash(), Expr::raw(ExprKind::Add, b, a).hash());
  // Names, values and kinds all matter.
  EXPECT_NE(Expr::var("a"), Expr::var("A"));
  EXPECT_NE(Expr::var("ab").hash(), Expr::var("ba").hash());
  EXPECT_NE(Expr(1).hash(), Expr(2).hash());
  EXPECT_NE(Expr::raw(ExprKind::Min, a, b), Expr::raw(ExprKind::Max, a, b));
}

TEST(ExprInterning, CompareIsAConsistentTotalOrder) {
  std::vector<Expr> xs = distinct_exprs();
  for (const Expr& x : xs) {
    EXPECT_EQ(Expr::compare(x, x), 0);
    for (const Expr& y : xs) {
      int c = Expr::compare(x, y);
      EXPECT_EQ(c == 0, x == y) << x.to_string() << " vs " << y.to_string();
      EXPECT_EQ(c, -Expr::compare(y, x)) << x.to_string() << " vs " << y.to_string();
    }
  }
  // Transitivity on a sample, via sorting and checking every adjacent and non-adjacent pair.
  std::sort(xs.begin(), xs.end(), [](const Expr& p, const Expr& q) { return Expr::compare(p, q) < 0; });
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    for (size_t j = i + 1; j < xs.size(); j += 7) EXPECT_LT(Expr::compare(xs[i], xs[j]), 0);
}

TEST(ExprInterning, ConcurrentBuildersAgree) {
  // Several threads build and simplify the same expressions; all must get the same nodes.
  constexpr int kThreads = 4, kN = 300;
  std::vector<std::vector<Expr>> results(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([t, &results] {
      RandomExprGen gen(555u, {"p", "q"});  // same seed: same sequence in every thread
      for (int i = 0; i < kN; ++i) results[t].push_back(gen.gen(4).simplify());
    });
  for (auto& th : ts) th.join();
  for (int t = 1; t < kThreads; ++t)
    for (int i = 0; i < kN; ++i) ASSERT_EQ(results[t][i], results[0][i]) << "thread " << t << " item " << i;
}
