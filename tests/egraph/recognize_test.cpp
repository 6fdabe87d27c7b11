// Recognition rules: the frontend's compositions become one kernel each, in every layout the
// frontend can produce, and the kernel plan computes what the graph computes.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "compiler/compile.h"
#include "frontend/ops.h"
#include "plan_check.h"

using namespace luminal;

namespace {

using plancheck::count_kernels;

// Compiles g, checks the kernel count, and compares the plan with the graph on random inputs.
void check(const Graph& g, const std::string& kernel, int expected, const DimMap& dims = {}) {
  CompileResult r = compile(g);
  EXPECT_EQ(count_kernels(r.plan, kernel), expected) << r.plan.dump();
  plancheck::expect_same_outputs(g, r.plan, dims, 1e-5);
}

}  // namespace

TEST(Recognize, MatmulInAllFourTranspositions) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Graph g;
      Tensor a = input(g, "a", DType::F32, ta ? Shape{5, 3} : Shape{3, 5});
      Tensor b = input(g, "b", DType::F32, tb ? Shape{4, 5} : Shape{5, 4});
      matmul(ta ? transpose(a, 0, 1) : a, tb ? transpose(b, 0, 1) : b).output("c");
      SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      check(g, "Matmul", 1);
    }
}

TEST(Recognize, BatchedBroadcastAndSymbolicMatmul) {
  Graph g;
  Expr m = Expr::var("m");
  Tensor a = input(g, "a", DType::F32, {2, 1, m, 4});
  Tensor b = input(g, "b", DType::F32, {3, 4, 5});
  matmul(a, b).output("c");             // batch [2, 1] with [3] -> [2, 3]
  linear(a, input(g, "w", DType::F32, {6, 4}), std::nullopt).output("d");
  check(g, "Matmul", 2, {{"m", 3}});
}

TEST(Recognize, MatrixVectorIsAMatmulToo) {
  Graph g;
  Tensor a = input(g, "a", DType::F32, {3, 5});
  Tensor v = input(g, "v", DType::F32, {5});
  matmul(a, v).output("c");
  check(g, "Matmul", 1);
}

TEST(Recognize, SoftmaxOverAnyAxis) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {3, Expr::var("n"), 4});
  softmax(x, -1).output("last");
  softmax(x, 1).output("middle");
  check(g, "Softmax", 2, {{"n", 5}});
}

TEST(Recognize, RmsNormWithAndWithoutWeight) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 8});
  rms_norm(x, input(g, "w", DType::F32, {8}), 1e-6).output("y");
  rms_norm(x * 2.0, std::nullopt, 1e-5).output("z");
  check(g, "RMSNorm", 1, {{"s", 3}});
  check(g, "RMSNormMul", 1, {{"s", 3}});  // the weight multiplied in the norm's kernel
}

// A bf16 weight (as checkpoints store it) is read by the norm's kernel as stored: no cast kernel.
TEST(Recognize, RmsNormReadsANarrowWeight) {
  for (DType t : {DType::BF16, DType::F16}) {
    Graph g;
    Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 8});
    rms_norm(x, cast(input(g, "w", t, {8}), DType::F32), 1e-6).output("y");
    CompileResult r = compile(g);
    EXPECT_EQ(count_kernels(r.plan, "RMSNormMul"), 1) << r.plan.dump();
    for (const Node& n : r.plan.nodes()) EXPECT_NE(n.op, OpKind::Cast) << r.plan.dump();
    plancheck::expect_same_outputs(g, r.plan, {{"s", 3}}, 1e-5);
  }
}

TEST(Recognize, LookalikesAreNotRecognised) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {3, 4});
  // exp(x - max) / sum over a different axis than the max: not a softmax.
  Tensor e = exp(x - max(x, {1}, true));
  (e / sum(e, {0}, true)).output("y");
  // x * rsqrt(mean(y^2)) with y != x: not an rms_norm (over either axis: the kernel takes any).
  Tensor y = x + 1.0;
  (x * rsqrt(mean(y * y, {0}, true) + 1e-6)).output("z");
  check(g, "Softmax", 0);
  check(g, "RMSNorm", 0);
}

TEST(Recognize, RotaryEmbeddingRotateHalf) {
  Graph g;
  Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {2, s, 8});
  Tensor c = input(g, "cos", DType::F32, {s, 8});
  Tensor sn = input(g, "sin", DType::F32, {s, 8});
  Tensor x1 = slice(x, -1, 0, 4), x2 = slice(x, -1, 4, 8);
  (x * c + concat({neg(x2), x1}, -1) * sn).output("y");
  // rotate_half the other way round is a different function: not a Rotary.
  (x * c + concat({x2, neg(x1)}, -1) * sn).output("not_rope");
  check(g, "Rotary", 1, {{"s", 3}});
}

TEST(Recognize, RotaryOfAPermutedView) {
  Graph g;
  Expr s = Expr::var("s");
  Tensor x = permute(input(g, "x", DType::F32, {s, 2, 8}), {1, 0, 2});  // heads out of a projection
  Tensor c = input(g, "cos", DType::F32, {s, 8});
  Tensor sn = input(g, "sin", DType::F32, {s, 8});
  (x * c + concat({neg(slice(x, -1, 4, 8)), slice(x, -1, 0, 4)}, -1) * sn).output("y");
  check(g, "Rotary", 1, {{"s", 2}});
}

// Qwen3's q_norm before RoPE: a norm over the head dim times its weight, then the rotary
// embedding of the result, is one RMSNormRotary (and the plan computes what the graph does); a
// norm over another axis is not (the rotary's rows would not be the norm's).
TEST(Recognize, RotaryOfANormOverTheSameAxis) {
  Graph g;
  Expr s = Expr::var("s");
  Tensor x = reshape(input(g, "x", DType::F32, {s, 16}), {s, 2, 8});  // heads out of a projection
  Tensor w = input(g, "w", DType::F32, {8});
  Tensor c = reshape(input(g, "cos", DType::F32, {s, 8}), {s, 1, 8});
  Tensor sn = reshape(input(g, "sin", DType::F32, {s, 8}), {s, 1, 8});
  auto rope = [&](const Tensor& t) { return t * c + concat({neg(slice(t, -1, 4, 8)), slice(t, -1, 0, 4)}, -1) * sn; };
  rope(rms_norm(x, w, 1e-6)).output("y");
  check(g, "RMSNormRotary", 1, {{"s", 3}});
  // Disabled by name (to measure what it is worth): a norm and a rotary again, the same outputs.
  CompileOptions without;
  without.disabled_rules = {"rms-norm-rotary"};
  const CompileResult apart = compile(g, without);
  EXPECT_EQ(count_kernels(apart.plan, "RMSNormRotary"), 0);
  EXPECT_EQ(count_kernels(apart.plan, "Rotary"), 1);
  plancheck::expect_same_outputs(g, apart.plan, {{"s", 3}}, 1e-5);
  without.disabled_rules = {"rms-norm-rotary-typo"};
  try {
    compile(g, without);
    ADD_FAILURE() << "an unknown rule name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rms-norm-rotary-typo'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rms-norm-rotary,"), std::string::npos) << e.what();  // the names it knows
  }
  Graph other;
  Tensor x2 = input(other, "x", DType::F32, {2, 8});
  Tensor c2 = input(other, "cos", DType::F32, {2, 8}), s2 = input(other, "sin", DType::F32, {2, 8});
  Tensor normed = transpose(rms_norm(transpose(x2, 0, 1), input(other, "w", DType::F32, {2}), 1e-6), 0, 1);  // over the first axis
  (normed * c2 + concat({neg(slice(normed, -1, 4, 8)), slice(normed, -1, 0, 4)}, -1) * s2).output("y");
  check(other, "RMSNormRotary", 0);
}

TEST(Recognize, WhereIsOneSelect) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {3, Expr::var("n")});
  Tensor m = input(g, "m", DType::Bool, {Expr::var("n")});
  where(m, x, -std::numeric_limits<double>::infinity()).output("masked");  // broadcast condition
  where(gt(x, scalar_like(x, 0.0)), x * 2.0, x).output("leaky");
  check(g, "Where", 2, {{"n", 4}});
}

TEST(Recognize, MaskedAttentionWithACache) {
  Graph g;
  Expr seq = Expr::var("seq"), past = Expr::var("past"), total = past + seq, z = Expr::index();
  Tensor q = input(g, "q", DType::F32, {2, seq, 8});
  Tensor k = input(g, "k", DType::F32, {2, total, 8});
  Tensor v = input(g, "v", DType::F32, {2, total, 8});
  Tensor causal = reshape(cast(iota(g, lt(z % total, z / total + past + 1), seq * total), DType::Bool), {seq, total});
  Tensor scores = matmul(q, transpose(k, 1, 2)) * 0.35;
  Tensor probs = softmax(where(causal, scores, -std::numeric_limits<double>::infinity()), -1);
  matmul(probs, v).output("out");
  check(g, "Attention", 1, {{"seq", 3}, {"past", 2}});
}

// Grouped-query attention as the decoder builds it: two query heads per key head ride in the
// rows of one matmul, and the mask and softmax see the scores split back into [kv, group, seq,
// keys].
TEST(Recognize, GroupedQueryAttention) {
  Graph g;
  Expr seq = Expr::var("seq"), past = Expr::var("past"), total = past + seq, z = Expr::index();
  Tensor q = input(g, "q", DType::F32, {2, seq * 2, 8});
  Tensor k = input(g, "k", DType::F32, {2, total, 8});
  Tensor v = input(g, "v", DType::F32, {2, total, 8});
  Tensor causal = reshape(cast(iota(g, lt(z % total, z / total + past + 1), seq * total), DType::Bool), {seq, total});
  Tensor scores = matmul(q, transpose(k, 1, 2)) * 0.35;
  Tensor masked = where(causal, reshape(scores, {2, 2, seq, total}), -std::numeric_limits<double>::infinity());
  matmul(reshape(softmax(masked, -1), {2, seq * 2, total}), v).output("out");
  check(g, "Attention", 1, {{"seq", 3}, {"past", 2}});
}

TEST(Recognize, LayerNormWithAndWithoutAffine) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 8});
  layer_norm(x, 1, input(g, "w", DType::F32, {8}), input(g, "b", DType::F32, {8}), 1e-5).output("y");
  layer_norm(x * 3.0, 1, std::nullopt, std::nullopt, 1e-6).output("z");
  check(g, "LayerNorm", 2, {{"s", 3}});
}


// A bf16 weight cast to f32 for a matmul is read directly by the Matmul (no f32 copy), with the
// bit-exact result of the cast-then-multiply graph.
TEST(Recognize, MatmulReadsNarrowWeightsWithoutACast) {
  for (DType t : {DType::BF16, DType::F16}) {
    Graph g;
    Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 12});
    Tensor w = input(g, "w", t, {7, 12});
    linear(x, cast(w, DType::F32), std::nullopt).output("y");
    CompileResult r = compile(g);
    EXPECT_EQ(count_kernels(r.plan, "Matmul"), 1);
    for (const Node& n : r.plan.nodes()) EXPECT_NE(n.op, OpKind::Cast) << r.plan.dump();
    plancheck::expect_same_outputs(g, r.plan, {{"s", 3}}, 0.0);
  }
}
