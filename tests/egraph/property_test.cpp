// Property: for random graphs and random plans extracted from their saturated e-graphs, every
// plan computes what the original graph computes on the reference interpreter. A wrong rule
// must make this fail (checked with a deliberately broken rule file).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "compiler/compile.h"
#include "egraph/dag_improve.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"

using namespace luminal;

namespace {

const Shape kShape = {Expr(3), Expr(4)};

Tensor random_op(std::mt19937& rng, std::vector<Tensor>& pool) {
  auto pick = [&]() { return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]; };
  Tensor a = pick(), b = pick();
  Graph& g = *a.graph();
  switch (std::uniform_int_distribution<int>(0, 23)(rng)) {
    case 23: return layer_norm(a, 1, std::nullopt, std::nullopt, 1e-5) + b;
    case 22: {  // masked attention: [3,3] scores over a, b
      Tensor s = matmul(a, transpose(b, 0, 1)) * 0.5;
      Tensor mask = lt(matmul(b, transpose(a, 0, 1)), s);
      return matmul(softmax(where(mask, s, -std::numeric_limits<double>::infinity()), -1), a);
    }
    case 20: return where(lt(a, b), a * 2.0, b);
    case 21: return where(gt(a, full(g, kShape, 0.5)), -std::numeric_limits<double>::infinity(), a) + b;
    case 16: return matmul(matmul(a, transpose(b, 0, 1)), a) * 0.25;  // [3,3] @ [3,4]
    case 17: return softmax(a, -1) + b;
    case 18: return rms_norm(a, std::nullopt, 1e-5) * b;
    case 19: return matmul(a, matmul(transpose(a, 0, 1), b)) * 0.1;  // transposed operands
    case 0: return a + b;
    case 1: return a * b;
    case 2: return a * 1.0;
    case 3: return a + 0.0;
    case 4: return neg(neg(a));
    case 5: return log2(exp2(a));
    case 6: return reciprocal(reciprocal(a + 3.0));
    case 7: return transpose(transpose(a, 0, 1), 0, 1) * b;
    case 8: return a + sum(b, {1}, true);
    case 9: return cast(cast(a, DType::BF16), DType::F32);
    case 10: return full(g, kShape, 2.0) * 3.0 + a;
    case 11: return relu(a);
    case 12: return flip(a, {1}) + b;
    case 13: return pad(slice(a, 1, 1, 4), {{0, 0}, {1, 0}}) + b;
    case 14: return sqrt(a * a + 1.0);
    default: return cast(cast(a, DType::F32), DType::F32) - b;
  }
}

Graph random_graph(std::mt19937& rng) {
  Graph g;
  std::vector<Tensor> pool = {input(g, "x", DType::F32, kShape), input(g, "y", DType::F32, kShape)};
  int n = std::uniform_int_distribution<int>(2, 7)(rng);
  for (int i = 0; i < n; ++i) pool.push_back(random_op(rng, pool));
  pool.back().output("out");
  pool[pool.size() - 2].output("out2");
  return g;
}

std::vector<float> run(const Graph& g, const std::vector<float>& x, const std::vector<float>& y, const char* out) {
  Interpreter rt(g);
  rt.set_input("x", Buffer::f32(x, {3, 4}));
  rt.set_input("y", Buffer::f32(y, {3, 4}));
  rt.run();
  return rt.output_f32(out);
}

bool close(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-5f + 1e-4f * std::fabs(b);
}

struct Outcome {
  int candidates = 0;
  int mismatches = 0;
  int distinct_plans = 0;  // summed over graphs: the check must see more than one plan per graph
  std::set<std::string> kernels;  // kernel kinds that appeared in checked plans
  int dag_swaps = 0;              // swaps the DAG-cost pass kept (it must make some)
  int dag_cost_increases = 0;     // plans the pass made costlier (it must make none)
  std::string first;
};

// Saturates each random graph's e-graph with `rules` and compares random plans to the graph.
Outcome check(const std::string& rule_text, int graphs, int plans_per_graph, uint32_t seed) {
  std::mt19937 rng(seed);
  Outcome o;
  for (int gi = 0; gi < graphs; ++gi) {
    Graph g = random_graph(rng);
    std::uniform_real_distribution<float> val(-2, 2);
    std::vector<float> x(12), y(12);
    for (auto& v : x) v = val(rng);
    for (auto& v : y) v = val(rng);
    std::vector<float> want = run(g, x, y, "out"), want2 = run(g, x, y, "out2");

    OpTable ops;
    RuleFunctions fns;
    RuleFile rules = rule_text.empty() ? builtin_rules(ops, fns) : parse_rules(rule_text, "test.rules", ops, fns);
    EGraph eg(ops);
    Seeded seeded = add_graph(eg, g);
    run_schedule(eg, rules, fns, RunLimits{});
    std::set<std::string> seen;
    for (int p = 0; p < plans_per_graph; ++p) {
      CostModel cm;
      cm.jitter_seed = static_cast<uint64_t>(p);  // plan 0 is the cost model's own choice
      Choice choice = extract_greedy(eg, cm);
      if (p % 2 == 1) {  // half the candidates also go through the DAG-cost pass, under the same costs
        double before = plan_cost(eg, choice, seeded.roots(), cm);
        o.dag_swaps += improve_dag_cost(eg, choice, seeded.roots(), cm);
        if (plan_cost(eg, choice, seeded.roots(), cm) > before * (1 + 1e-9)) ++o.dag_cost_increases;
      }
      Graph plan = choice_to_graph(eg, choice, seeded.roots());
      std::vector<float> got = run(plan, x, y, "out"), got2 = run(plan, x, y, "out2");
      ++o.candidates;
      if (seen.insert(plan.dump()).second) ++o.distinct_plans;
      for (const Node& n : plan.nodes())
        if (n.op == OpKind::Kernel) o.kernels.insert(n.kernel);
      for (size_t i = 0; i < got.size(); ++i) {
        if (close(got[i], want[i]) && close(got2[i], want2[i])) continue;
        if (o.mismatches++ == 0)
          o.first = "graph " + std::to_string(gi) + " plan " + std::to_string(p) + " element " + std::to_string(i) +
                    ": got " + std::to_string(got[i]) + "/" + std::to_string(got2[i]) + ", want " +
                    std::to_string(want[i]) + "/" + std::to_string(want2[i]) + "\n" + g.dump() + "plan:\n" + plan.dump();
        break;
      }
    }
  }
  return o;
}

}  // namespace

TEST(EGraphProperty, EveryPlanOfTheBuiltinRulesMatchesTheReference) {
  Outcome o = check("", 250, 6, 1234);
  EXPECT_EQ(o.candidates, 1500);
  EXPECT_GT(o.distinct_plans, 250);  // the random extractions really explore the e-graphs
  for (const char* k : {"Matmul", "Softmax", "RMSNorm", "LayerNorm", "Where", "Attention", "Fused", "FusedSum", "FusedMax"})
    EXPECT_TRUE(o.kernels.count(k)) << k << " never appeared in a checked plan";
  std::printf("property: %d plans, %d distinct, %d DAG-cost swaps\n", o.candidates, o.distinct_plans, o.dag_swaps);
  EXPECT_GT(o.dag_swaps, 0);
  EXPECT_EQ(o.dag_cost_increases, 0);
  EXPECT_EQ(o.mismatches, 0) << o.first;
}

TEST(EGraphProperty, ABrokenRuleIsCaught) {
  // x + y == x * y is false; the property check must notice.
  const char* broken = R"(
ruleset bad
rule add-is-mul: (Add ?x ?y) => (Mul ?x ?y)
)";
  Outcome o = check(broken, 60, 6, 99);
  EXPECT_GT(o.mismatches, 0);
}

TEST(EGraphProperty, PlansGetSmallerThanTheGraph) {
  // x*1, neg(neg(x)), transposes and folded constants must disappear from the cost model's plan.
  Graph g;
  Tensor x = input(g, "x", DType::F32, kShape);
  Tensor y = neg(neg(transpose(transpose(x, 0, 1), 0, 1) * 1.0)) + (full(g, kShape, 2.0) * 3.0);
  y.output("out");
  CompileResult r = compile(g);
  EXPECT_LT(r.plan_nodes, r.graph_nodes);
  // What is left: x, one fused kernel (x + 6, the constant folded into its program), the Output.
  EXPECT_EQ(r.plan_nodes, 3u) << r.plan.dump();
  std::vector<float> xv(12, 1.5f);
  Interpreter rt(r.plan);
  rt.set_input("x", Buffer::f32(xv, {3, 4}));
  rt.run();
  for (float v : rt.output_f32("out")) EXPECT_FLOAT_EQ(v, 7.5f);
}
