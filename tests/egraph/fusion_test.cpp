// Fusion: chains and trees of elementwise ops become one Fused kernel, reductions take their
// elementwise prologue, and fused plans compute bit for bit what the unfused graph computes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "compiler/compile.h"
#include "core/error.h"
#include "frontend/ops.h"
#include "graph/fused_program.h"
#include "plan_check.h"

using namespace luminal;

namespace {

std::vector<const Node*> kernels(const Graph& plan, const std::string& name) {
  std::vector<const Node*> r;
  for (const Node& n : plan.nodes())
    if (n.op == OpKind::Kernel && n.kernel == name) r.push_back(&n);
  return r;
}

}  // namespace

TEST(Fusion, ElementwiseTreeBecomesOneKernel) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("n"), 8});
  Tensor y = input(g, "y", DType::F32, {Expr::var("n"), 8});
  (silu(x) * y + sqrt(x * x + 1.0)).output("z");
  CompileResult r = compile(g);
  auto fused = kernels(r.plan, "Fused");
  ASSERT_EQ(fused.size(), 1u) << r.plan.dump();
  EXPECT_EQ(fused[0]->inputs.size(), 2u);  // x and y; constants live in the program
  FusedProgram p = FusedProgram::decode(fused[0]->code);
  EXPECT_GE(p.instrs.size(), 8u);
  plancheck::expect_same_outputs(g, r.plan, {{"n", 5}}, 0, 3.0f);
}

TEST(Fusion, ReductionTakesItsPrologue) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {4, 6});
  sum(exp(x) * 0.5, {1}).output("s");
  max(x * x - 2.0, {0}).output("m");
  CompileResult r = compile(g);
  EXPECT_EQ(kernels(r.plan, "FusedSum").size(), 1u) << r.plan.dump();
  EXPECT_EQ(kernels(r.plan, "FusedMax").size(), 1u) << r.plan.dump();
  plancheck::expect_same_outputs(g, r.plan, {}, 0, 3.0f);
}

TEST(Fusion, MixedDtypesKeepTheirRounding) {
  Graph g;
  Tensor x = input(g, "x", DType::BF16, {16});
  Tensor i = cast(cast(x, DType::F32) * 100.0, DType::I32);
  (cast(i, DType::F32) + cast(x, DType::F32) / 3.0).output("y");
  CompileResult r = compile(g);
  EXPECT_FALSE(kernels(r.plan, "Fused").empty());
  plancheck::expect_same_outputs(g, r.plan, {}, 0, 3.0f);
}

TEST(Fusion, ProgramsRoundTripAndRejectDamage) {
  FusedProgram p;
  p.n_inputs = 1;
  p.instrs.push_back({static_cast<int>(OpKind::Exp2), DType::F32, DType::F32, 0, -1, 0});
  p.instrs.push_back({FusedInstr::kConst, DType::F32, DType::F32, -1, -1, 2.5f});
  p.instrs.push_back({static_cast<int>(OpKind::Mul), DType::F32, DType::F32, 1, 2, 0});
  FusedProgram q = FusedProgram::decode(p.encode());
  EXPECT_EQ(q.encode(), p.encode());
  std::vector<int64_t> bad = p.encode();
  bad[2 + 6 * 2 + 3] = 7;  // the Mul reads an operand that does not exist yet
  EXPECT_THROW(FusedProgram::decode(bad), Error);
  EXPECT_THROW(FusedProgram::decode({1}), Error);
}

TEST(Fusion, ReductionTakesItsEpilogueToo) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("n"), 6});
  (mean(exp(x), {1}) * 2.0 + 1.0).output("y");  // prologue exp, sum, epilogue * (1/6) * 2 + 1
  (max(x, {1}) * 3.0).output("m");                // no prologue, an epilogue
  CompileResult r = compile(g);
  int with_epilogue = 0;
  for (const char* name : {"FusedSum", "FusedMax"})
    for (const Node* n : kernels(r.plan, name)) {
      size_t pos = 0;
      FusedProgram::decode(n->code, pos);
      with_epilogue += pos < n->code.size();
    }
  EXPECT_EQ(with_epilogue, 2) << r.plan.dump();
  plancheck::expect_same_outputs(g, r.plan, {{"n", 4}}, 0, 3.0f);
}

// Index arithmetic as the torch frontend lowers it: every integer constant is a one-element Iota
// broadcast to the shape. Those are program constants, not kernel inputs; as inputs they had
// exhausted the input budget (8), and the chain below ran as several kernels instead of one.
TEST(Fusion, OneValueIotasAreProgramConstants) {
  Graph g;
  Tensor pos = input(g, "pos", DType::I32, {1});
  Tensor lane = iota(g, Expr::index(), 32);
  auto k = [&](int64_t v) { return iota(g, v, 1); };
  Tensor t = lane * k(3) + pos;
  for (int64_t v : {7, -2, 128, 1024}) t = (t + k(v)) * k(v + 5);  // 9 constants, 2 inputs
  t.output("index");
  CompileResult r = compile(g);
  auto fused = kernels(r.plan, "Fused");
  ASSERT_EQ(fused.size(), 1u) << r.plan.dump();
  EXPECT_LE(fused[0]->inputs.size(), 2u) << r.plan.dump();  // pos and the lane iota
  plancheck::expect_same_outputs(g, r.plan, {}, 0, 100.0f);
}

// An MoE's routing: the chosen-expert mask is a count over [seq, E, E] with its comparison as
// epilogue, kept for the experts' products; the weights normalised to sum 1 then read it. Trees
// inlined as deep as they go recompute the mask's epilogue and so read the count, which only a
// second count kernel would give: the normalisation stayed four primitive kernels (Mul,
// SumReduce, Recip, Mul). The trees that stop at kept classes give a sum and one elementwise
// kernel, both reading the softmax and the mask.
TEST(Fusion, TreesCanStopAtClassesAPlanKeeps) {
  Graph g;
  const int64_t E = 16, K = 4;
  Tensor probs = softmax(input(g, "logits", DType::F32, {Expr::var("s"), E}), -1);
  Tensor lower = lt(unsqueeze(arange(g, 0, E), 0), unsqueeze(arange(g, 0, E), 1));
  Tensor mine = unsqueeze(probs, 2), other = unsqueeze(probs, 1);
  Tensor before = logical_or(gt(other, mine), logical_and(eq(other, mine), lower));
  Tensor chosen = cast(lt(sum(cast(before, DType::F32), {2}), full(g, {1}, static_cast<double>(K))), DType::F32);
  chosen.output("chosen");  // another reader keeps it (the experts' products in a model)
  Tensor w = probs * chosen;
  (w / sum(w, {-1}, true)).output("weights");
  CompileResult r = compile(g);
  for (const Node& n : r.plan.nodes())
    EXPECT_TRUE(n.op == OpKind::Kernel || n.op == OpKind::Input || n.op == OpKind::Output || n.op == OpKind::Iota ||
                n.op == OpKind::LessThan)  // the [E, E] index comparison, made once
        << "a primitive " << op_name(n.op) << " is its own kernel:\n" << r.plan.dump();
  EXPECT_EQ(kernels(r.plan, "FusedSum").size(), 2u) << r.plan.dump();  // the count and the weights' sum
  EXPECT_EQ(kernels(r.plan, "Fused").size(), 1u) << r.plan.dump();
  plancheck::expect_same_outputs(g, r.plan, {{"s", 5}}, 1e-6);
}
