// The e-graph engine: hash-consing, union-find with congruence closure, analysis checks.
#include <gtest/gtest.h>

#include "core/error.h"
#include "egraph/egraph.h"

using namespace luminal;

namespace {

struct Fixture {
  OpTable ops;
  EGraph g{ops};
  ClassId input(const std::string& name) {
    Attr a;
    a.name = name;
    a.dtype = DType::F32;
    a.exprs = {Expr(4)};
    return g.add(ENode{ops.primitive(OpKind::Input), g.attrs().intern(a), {}});
  }
  ClassId unary(OpKind k, ClassId x) { return g.add(ENode{ops.primitive(k), AttrTable::kNone, {x}}); }
  ClassId binary(OpKind k, ClassId x, ClassId y) { return g.add(ENode{ops.primitive(k), AttrTable::kNone, {x, y}}); }
};

}  // namespace

TEST(EGraphCore, HashConsingSharesEqualNodes) {
  Fixture f;
  ClassId a = f.input("a");
  EXPECT_EQ(f.input("a"), a);
  ClassId s1 = f.unary(OpKind::Sqrt, a);
  EXPECT_EQ(f.unary(OpKind::Sqrt, a), s1);
  EXPECT_NE(f.unary(OpKind::Exp2, a), s1);
  EXPECT_EQ(f.g.node_count(), 3u);
  EXPECT_EQ(f.g.class_count(), 3u);
}

TEST(EGraphCore, MergeRestoresCongruenceOnRebuild) {
  Fixture f;
  ClassId a = f.input("a"), b = f.input("b");
  ClassId fa = f.unary(OpKind::Sqrt, a), fb = f.unary(OpKind::Sqrt, b);
  ClassId gfa = f.unary(OpKind::Exp2, fa), gfb = f.unary(OpKind::Exp2, fb);
  EXPECT_NE(f.g.find(fa), f.g.find(fb));
  EXPECT_TRUE(f.g.merge(a, b, "test"));
  EXPECT_FALSE(f.g.merge(a, b, "test"));
  f.g.rebuild();
  // a = b implies sqrt(a) = sqrt(b) implies exp2(sqrt(a)) = exp2(sqrt(b)).
  EXPECT_EQ(f.g.find(fa), f.g.find(fb));
  EXPECT_EQ(f.g.find(gfa), f.g.find(gfb));
  EXPECT_EQ(f.g.class_count(), 3u);
  // Re-adding a node after the merge finds the merged class.
  EXPECT_EQ(f.g.find(f.unary(OpKind::Sqrt, b)), f.g.find(fa));
}

TEST(EGraphCore, SelfReferentialClassesAfterMerge) {
  // x * y merged with x makes a cycle (x's class contains a node using itself); rebuild and
  // lookups must still terminate.
  Fixture f;
  ClassId x = f.input("x"), y = f.input("y");
  ClassId m = f.binary(OpKind::Mul, x, y);
  f.g.merge(m, x, "test");
  f.g.rebuild();
  EXPECT_EQ(f.g.find(f.binary(OpKind::Mul, x, y)), f.g.find(x));
  EXPECT_EQ(f.g.eclass(x).nodes.size(), 2u);
}

TEST(EGraphCore, AnalysisDisagreementNamesTheRule) {
  Fixture f;
  ClassId a = f.input("a");
  ClassId lt = f.binary(OpKind::LessThan, a, a);  // bool[4]
  try {
    f.g.merge(a, lt, "my-bad-rule (x.rules:3)");
    FAIL() << "merging an f32 class with a bool class must throw";
  } catch (const InternalError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("my-bad-rule (x.rules:3)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bool"), std::string::npos) << msg;
  }
}

TEST(EGraphCore, AnalysisFollowsOpSemantics) {
  Fixture f;
  ClassId a = f.input("a");
  Attr axis;
  axis.axis = 0;
  ClassId s = f.g.add(ENode{f.ops.primitive(OpKind::SumReduce), f.g.attrs().intern(axis), {a}});
  EXPECT_TRUE(f.g.info(s).shape.empty());
  EXPECT_EQ(f.g.info(f.binary(OpKind::LessThan, a, a)).dtype, DType::Bool);
  Attr v;
  v.view = View::contiguous({Expr(4)}).reshape({Expr(2), Expr(2)});
  ClassId r = f.g.add(ENode{f.ops.view(), f.g.attrs().intern(v), {a}});
  EXPECT_EQ(to_string(f.g.info(r).shape), "[2, 2]");
}
