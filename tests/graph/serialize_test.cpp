// Graph serialization: a round trip keeps every node, attribute and view exactly, and damaged
// text fails with the line it is on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "frontend/ops.h"
#include "graph/serialize.h"
#include "models/llama_graph.h"

using namespace luminal;

namespace {

Graph sample() {
  Graph g;
  Expr s = Expr::var("s");
  Tensor x = input(g, "x \"quoted\" name", DType::BF16, {s, 6});
  Tensor y = pad(slice(transpose(x, 0, 1), 1, 1, s), {{1, 2}}, -std::numeric_limits<double>::infinity());
  Tensor z = reshape(flip(y, {0}), {-1});
  (cast(z, DType::F32) * std::numeric_limits<double>::quiet_NaN()).output("nan");
  cumsum(cast(x, DType::F32), 0).output("cs");
  argsort(cast(x, DType::F32), 1).output("order");
  return g;
}

}  // namespace

TEST(Serialize, RoundTripIsExact) {
  Graph g = sample();
  std::string text = serialize(g);
  Graph back = deserialize(text);
  EXPECT_EQ(back.dump(), g.dump());
  EXPECT_EQ(serialize(back), text);
  ASSERT_EQ(back.size(), g.size());
  for (NodeId i = 0; i < g.size(); ++i) {
    ASSERT_EQ(back.node(i).inputs.size(), g.node(i).inputs.size());
    for (size_t k = 0; k < g.node(i).inputs.size(); ++k) EXPECT_TRUE(back.node(i).inputs[k].view == g.node(i).inputs[k].view);
  }
}

TEST(Serialize, LlamaGraphRoundTrips) {
  Graph g;
  build_llama(g, LlamaShape::tiny());
  std::string text = serialize(g);
  EXPECT_EQ(serialize(deserialize(text)), text);
}

TEST(Serialize, ExpressionsRoundTripThroughSexpr) {
  Expr s = Expr::var("s"), z = Expr::index();
  for (Expr e : {Expr(-5), s, z, (z / 4) % s + 3 * s, min(s, z) - max(s, Expr(2)), ceil_div(s, Expr(3)),
                 logical_and(lt(z, s), ge(z, Expr(1))), logical_or(lt(z, Expr(-2)), ge(s, z))})
    EXPECT_EQ(Expr::parse_sexpr(e.to_sexpr()), e) << e.to_sexpr();
  EXPECT_THROW(Expr::parse_sexpr("(+ s"), Error);
  EXPECT_THROW(Expr::parse_sexpr("(pow s 2)"), Error);
  EXPECT_THROW(Expr::parse_sexpr("12x"), Error);
}

TEST(Serialize, DamagedTextNamesTheLine) {
  std::string text = serialize(sample());
  auto expect_line_error = [](const std::string& t, const std::string& what) {
    try {
      deserialize(t);
      ADD_FAILURE() << "accepted damaged text (" << what << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
    }
  };
  expect_line_error(text.substr(0, text.size() / 2), "truncated");
  std::string wrong_op = text;
  wrong_op.replace(wrong_op.find("node Input"), 10, "node Inptu");
  expect_line_error(wrong_op, "unknown op");
  std::string bad_header = "luminal-graph 2 1\n";
  expect_line_error(bad_header, "version");
  std::string wrong_dtype = text;
  wrong_dtype.replace(wrong_dtype.find(" bf16 "), 6, " f32  ");
  expect_line_error(wrong_dtype, "declared dtype disagrees");
}
