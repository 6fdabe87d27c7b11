// ScaledMatmul: an MoE's expert products become kernels that skip the rows (and the weights) of
// experts a token did not choose, on the reference kernels and the CPU backend's.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "compiler/compile.h"
#include "egraph/moe_experts_case.h"
#include "frontend/ops.h"
#include "plan_check.h"

using namespace luminal;

namespace {

void run_with(Interpreter& rt, const std::map<std::string, Buffer>& in, int64_t s) {
  for (const auto& [name, buf] : in) rt.set_input(name, buf);
  rt.set_dim("s", s);
  rt.run();
}

}  // namespace

TEST(ScaledMatmul, ExpertsNoTokenChoseAreNeverRead) {
  for (DType wt : {DType::BF16, DType::F32}) {
    moetest::MoeExperts c;
    c.weight_dtype = wt;
    Graph g = c.graph();
    CompileResult r = compile(g);
    ASSERT_EQ(plancheck::count_kernels(r.plan, "ScaledMatmul"), 1) << r.plan.dump();
    cpu::ThreadPool pool(2);
    for (int64_t s : {1, 2, 5}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " s=" + std::to_string(s));
      auto in = c.inputs(s);
      std::vector<double> want = c.expected(in, s);
      // The graph as written multiplies the NaN weights by zero: the poison is real.
      Interpreter raw(g);
      run_with(raw, in, s);
      EXPECT_TRUE(std::isnan(raw.output_f32("out")[0]));
      Interpreter ref(r.plan), fast(r.plan);
      fast.set_kernel_hook(cpu::cpu_kernels(pool));
      run_with(ref, in, s);
      run_with(fast, in, s);
      std::vector<float> a = ref.output_f32("out"), b = fast.output_f32("out");
      ASSERT_EQ(a.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(a[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "reference kernels, out[" << i << "]";
        ASSERT_NEAR(b[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "cpu kernels, out[" << i << "]";
      }
    }
  }
}

// Finite inputs: the plan computes what the graph does (rows scaled by any value, several tokens).
TEST(ScaledMatmul, PlanMatchesTheGraphOnRandomScales) {
  Graph g = moetest::MoeExperts{}.graph();
  CompileResult r = compile(g);
  EXPECT_EQ(plancheck::count_kernels(r.plan, "ScaledMatmul"), 1);
  plancheck::expect_same_outputs(g, r.plan, {{"s", 4}}, 1e-5);
}

// A constant factor on a linear layer's input is no row scale: the layer stays a Matmul, which
// the backends hand to their GEMM libraries.
TEST(ScaledMatmul, UnbatchedLinearLayersKeepTheirMatmul) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 16});
  Tensor gate = input(g, "gate", DType::F32, {Expr::var("s"), 1});
  Tensor w = input(g, "w", DType::F32, {8, 16});
  linear(x * 2.0, w, std::nullopt).output("a");
  linear(x * gate, w, std::nullopt).output("b");
  CompileResult r = compile(g);
  EXPECT_EQ(plancheck::count_kernels(r.plan, "ScaledMatmul"), 0) << r.plan.dump();
  EXPECT_EQ(plancheck::count_kernels(r.plan, "Matmul"), 2);
  plancheck::expect_same_outputs(g, r.plan, {{"s", 3}}, 1e-5);
}
