#include <gtest/gtest.h>

#include "symbolic/expr.h"

using namespace luminal;

TEST(ExprSmoke, InterningAndBasicIdentities) {
  Expr s = Expr::var("s");
  EXPECT_EQ(s + 0, s);
  EXPECT_EQ(s * 1, s);
  EXPECT_EQ((s * 4) / 4, s);
  EXPECT_EQ((s % 7) % 7, s % 7);
  EXPECT_EQ(s + 1, 1 + s);
  Expr z = Expr::index();
  EXPECT_EQ((z / 8) * 8 + z % 8, z);
  EXPECT_EQ(((z / 32) % 4) * 32 + (z / 128) * 128 + z % 32, z);
}
