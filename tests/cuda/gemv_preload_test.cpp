// Dense GEMVs whose weight loads start before the kernel's wait (gen::linear_weight_preload,
// LUMINAL_CUDA_GEMV_PRELOAD): the first k pass of each thread's first unit is loaded before the
// wait and summed after it, and the unit's loop starts at its second pass. The rows here are
// long enough for that pass in every schedule (k of 4104 bf16 and 2052 f32 values), and one
// block a multiprocessor leaves teams several units each, so that only a thread's first unit
// may take the early loads.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "cuda/cuda_cases.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

using testing::compiled;

bool have_gpu() { return unavailable_reason().empty() && nvrtc_unavailable_reason().empty(); }

double largest_of(const Buffer& b) {
  double m = 0;
  for (size_t i = 0; i < b.numel(); ++i) m = std::max(m, std::abs(b.get(i)));
  return m;
}

// The generated text: in a GEMV over a weight input, the early loads come before its wait.
TEST(CudaCodegen, DenseGemvsLoadTheirFirstWeightsBeforeTheWait) {
  if (!gen::weights_before_wait()) GTEST_SKIP() << "LUMINAL_CUDA_GEMV_PRELOAD=0";
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), Expr(2048)});
  linear(x, cast(input(g, "w", DType::BF16, {Expr(64), Expr(2048)}), DType::F32), std::nullopt).output("y");
  const std::string src = generate_plan_kernels(compiled(g)).source();
  const size_t pre = src.find("lm_pre = true;");
  ASSERT_NE(pre, std::string::npos);
  const size_t fn = src.rfind("__global__", pre), wait = src.find("lm_grid_wait();", fn);
  EXPECT_LT(pre, wait);
  EXPECT_LT(src.find("lm_q0_0 = __ldcs(", fn), wait);
  EXPECT_GT(src.find("if (lm_pre) {", fn), wait);  // summed after it
}

// A normed group of two (inline and staged norms), a lone f32 layer and a normed gated group,
// every third schedule, 1, 3 and 9 rows, launched, recorded and replayed; then new weights, which the
// early loads must read too.
TEST(CudaBackend, GemvsLoadingWeightsBeforeTheirWaitMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  // n a multiple of 16: each weight a whole number of 256-byte steps, so the members of each
  // group lie end to end and run as one GEMV (CudaExecutor's groups).
  const int64_t k1 = 4104, k2 = 2052, n = 144;
  const Expr s = Expr::var("s");
  Graph g;
  Tensor x1 = input(g, "x1", DType::F32, {s, Expr(k1)}), x2 = input(g, "x2", DType::F32, {s, Expr(k2)}), x3 = input(g, "x3", DType::F32, {s, Expr(k1)});
  Tensor gain = input(g, "gain", DType::BF16, {Expr(k1)});
  std::map<std::string, std::vector<int64_t>> shapes = {{"wq", {n, k1}}, {"wk", {n + 16, k1}}, {"wo", {n, k2}}, {"gate", {n, k1}}, {"up", {n, k1}}};
  std::map<std::string, Tensor> w;
  for (const auto& [name, shape] : shapes)
    w.emplace(name, input(g, name, name == "wo" ? DType::F32 : DType::BF16, {Expr(shape[0]), Expr(shape[1])}));
  auto lin = [&](const Tensor& a, const char* name) {
    const Tensor& t = w.at(name);
    return linear(a, t.dtype() == DType::F32 ? t : cast(t, DType::F32), std::nullopt);
  };
  Tensor h1 = rms_norm(x1, cast(gain, DType::F32), 1e-6);
  lin(h1, "wq").output("q");
  lin(h1, "wk").output("k");
  lin(x2, "wo").output("o");
  Tensor h3 = rms_norm(x3, cast(gain, DType::F32), 1e-5);  // a normed gated group, as a dense decoder's gate/up
  (silu(lin(h3, "gate")) * lin(h3, "up")).output("y");
  const Graph plan = compiled(g);
  uint32_t seed = 700;
  std::map<std::string, Buffer> weights = {{"gain", testing::random_buffer(DType::BF16, {k1}, seed++, 0.5, 1.5)}};
  for (const auto& [name, shape] : shapes) weights[name] = testing::random_buffer(name == "wo" ? DType::F32 : DType::BF16, shape, seed++);
  // Every third schedule: the inline ones (kLinearVariants), then the staged norms' (the group's).
  for (int variant = 0; variant < 2 * static_cast<int>(std::size(gen::kLinearVariants)); variant += 3)
    for (int64_t m : {1, 3, 9}) {
      std::map<std::string, Buffer> inputs = weights;
      inputs["x1"] = testing::random_buffer(DType::F32, {m, k1}, seed++);
      inputs["x2"] = testing::random_buffer(DType::F32, {m, k2}, seed++);
      inputs["x3"] = testing::random_buffer(DType::F32, {m, k1}, seed++);
      CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .force_variant = variant, .blocks_per_sm = 1});
      for (const auto& [name, b] : inputs) cuda.set_input(name, b);
      for (int round = 0; round < 2; ++round) {
        if (round == 1) {  // new weights: the recorded graph replays, its early loads read them
          for (const char* name : {"wq", "wo", "gate"}) {
            inputs[name] = testing::random_buffer(name == std::string("wo") ? DType::F32 : DType::BF16, shapes.at(name), seed++);
            cuda.set_input(name, inputs[name]);
          }
        }
        Interpreter ref(plan);
        for (const auto& [name, b] : inputs) ref.set_input(name, b);
        ref.run();
        for (int run = 0; run < 3; ++run) {  // launched, recorded, replayed
          cuda.run();
          for (const char* o : {"q", "k", "o", "y"}) {
            const Buffer want = ref.output(o);
            const std::string at = " variant " + std::to_string(variant) + " m=" + std::to_string(m) + " round " + std::to_string(round) +
                                   " run " + std::to_string(run + 1);
            const Buffer got = cuda.output(o);
            ASSERT_EQ(got.numel(), want.numel());
            const double tol = 2e-5 * largest_of(want);
            for (size_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(got.get(i), want.get(i), tol) << o << "[" << i << "]" << at;
          }
        }
      }
      // The norms and the gated product ran inside their GEMVs (the forms with early loads).
      EXPECT_GT(cuda.norms_folded(), 0) << "variant " << variant << " m=" << m;
      EXPECT_GT(cuda.products_folded(), 0) << "variant " << variant << " m=" << m;
    }
}

// An MoE block of one token, then three (moe_routing_and_experts): with one token the
// gated gate/up experts release the expert sum after their wait, and the sum, launched right
// after them, lists its experts and loads its first weights before its own wait
// (NodeKernels::expert_sum_early). Four chosen experts of 1024 values end to end each: long
// enough for a first pass in every expert-sum schedule. Every schedule, launched, recorded and
// replayed, against the reference.
TEST(CudaBackend, ExpertSumsLoadingWeightsBeforeTheirWaitMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  if (!gen::expert_sums_before_wait()) GTEST_SKIP() << "LUMINAL_CUDA_EXPERT_SUM_PRELOAD=0";
  constexpr int64_t E = 16, K = 4, I = 1024, H = 256;
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), Expr(H)});
  testing::moe_routing_and_experts(g, x, rms_norm(x, cast(input(g, "gain", DType::BF16, {Expr(H)}), DType::F32), 1e-6), E, K, I, H);
  const Graph plan = compiled(g);
  uint32_t seed = 800;
  const std::map<std::string, Buffer> weights{{"gain", testing::random_buffer(DType::BF16, {H}, seed++)},
                                              {"router", testing::random_buffer(DType::BF16, {E, H}, seed++)},
                                              {"w_gu", testing::random_buffer(DType::BF16, {E, 2 * I, H}, seed++, -0.05f, 0.05f)},
                                              {"w_d", testing::random_buffer(DType::BF16, {E, H, I}, seed++, -0.05f, 0.05f)}};
  // Schedules of 32, 128 and 64 threads a team, one row and four (kExpertSumVariants).
  static_assert(std::size(gen::kExpertSumVariants) == 11, "the forced indices below count them");
  for (int variant : {2, 5, 7}) {
    CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .force_variant = variant, .blocks_per_sm = 1});
    for (const auto& [name, b] : weights) cuda.set_input(name, b);
    for (int64_t rows : {int64_t{1}, int64_t{3}}) {
      std::map<std::string, Buffer> in = weights;
      in["x"] = testing::random_buffer(DType::F32, {rows, H}, seed++);
      cuda.set_input("x", in["x"]);
      Interpreter ref(g);
      for (const auto& [name, b] : in) ref.set_input(name, b);
      ref.run();
      const int64_t before = cuda.expert_sums_early();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        const std::string at = " (variant " + std::to_string(variant) + ", s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) + ")";
        for (const char* name : {"weights", "out"})
          ASSERT_NO_FATAL_FAILURE(testing::assert_near_buffers(ref.output(name), cuda.output(name), 2e-5, name, at));
        if (rep == 0) {
          EXPECT_EQ(cuda.expert_sums_early() > before, rows == 1) << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace luminal::cuda
