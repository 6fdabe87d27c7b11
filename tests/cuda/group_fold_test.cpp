// A decode's routing group inside its gate/up experts' GEMV (fold_small_groups,
// NodeKernels::routed, CudaOptions::fold_groups): which groups fold, the twins' code, and on the
// GPU an MoE block's outputs with and without the fold against the reference.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "cuda/cuda_cases.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

using testing::compiled;

using testing::fixture_config;

// Each layer of an MoE decoder: its routing group (one block: top-k ranks) folds into its gate/up
// experts, whose gated forms (plain and normed) get twins that take the group's outputs and
// leaves, run its code after their wait and read their scales from its shared copy. Off, none.
TEST(CudaCodegen, RoutingGroupsFoldIntoTheirGateUpExperts) {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  build_decoder(g, fixture_config("qwen3-moe-tiny"), o);
  const Graph plan = compiled(g);
  for (bool on : {true, false}) {
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.fold_groups = on});
    int folded = 0;
    for (const SmallGroup& grp : k.small_groups) {
      if (!grp.fold_reader) continue;
      ++folded;
      const Node& r = plan.node(*grp.fold_reader);
      EXPECT_EQ(r.kernel, "ScaledMatmul");
      EXPECT_EQ(r.inputs[2].src, grp.nodes[grp.fold_member]);
      const NodeKernels& gated = *k.per_node[*grp.fold_reader]->gated;
      ASSERT_TRUE(gated.routed);
      ASSERT_TRUE(gated.normed && gated.normed->routed);
      for (const NodeKernels* twin : {gated.routed.get(), gated.normed->routed.get()}) {
        const NodeKernels& of = twin == gated.routed.get() ? gated : *gated.normed;
        ASSERT_EQ(twin->launches.size(), of.launches.size());
        ASSERT_EQ(twin->alternatives.size(), of.alternatives.size());
        const std::string* text = k.functions.find(twin->launches[0].function);
        ASSERT_NE(text, nullptr);
        EXPECT_NE(text->find("lm_in2 = (const char*)lm_gs" + std::to_string(grp.fold_member) + ";"), std::string::npos);
        EXPECT_NE(text->find("top-k ranks"), std::string::npos);
        EXPECT_NE(text->find("const char* __restrict__ lm_gl0, const long long* __restrict__ lm_dims)"), std::string::npos);
        // The group's code after the wait, the scales read after it.
        EXPECT_LT(text->find("lm_grid_wait();"), text->find("lm_gs0["));
      }
    }
    EXPECT_EQ(folded, on ? fixture_config("qwen3-moe-tiny").layers : 0) << "fold " << on;
    if (on && nvrtc_unavailable_reason().empty()) {
      PlanKernels all = generate_plan_kernels(plan, CodegenOptions{.fold_groups = true});
      all.drop_alternatives();
      EXPECT_NO_THROW(nvrtc_compile(all.source(), "sm_90", ""));
    }
  }
}

// An MoE block as the decoder writes it (src/models/decoder_graph.cpp): the norm, the router,
// its softmax, top-k ranks and renormalised weights, the gate/up experts scaled by the choice,
// act(gate) * up, the down experts scaled by the weights, their sum and the residual.
Graph moe_block(int64_t E, int64_t K, int64_t I, int64_t H) {
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, H});
  Tensor h = rms_norm(x, cast(input(g, "gain", DType::BF16, {H}), DType::F32), 1e-6);
  Tensor probs = softmax(linear(h, cast(input(g, "router", DType::BF16, {E, H}), DType::F32), std::nullopt), -1);
  Tensor chosen = testing::top_k_chosen(g, probs, E, K);
  Tensor w = probs * chosen;
  w = w / sum(w, {-1}, true);
  (x + testing::gated_experts(g, h, chosen, w, E, I, H)).output("out");
  w.output("weights");
  return g;
}

// One token: with the fold the routing group launches nothing (it runs in the gate/up experts'
// blocks, block 0 storing the weights the down experts read), and the outputs are the
// reference's; three tokens: no group, no fold. With and without the fold; recorded and
// replayed graphs.
TEST(CudaBackend, FoldedRoutingGroupsMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  constexpr int64_t E = 16, K = 4, I = 64, H = 256;
  const Graph g = moe_block(E, K, I, H);
  const Graph plan = compiled(g);
  for (bool on : {true, false}) {
    CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .tune_variants = false, .fold_groups = on});
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{1}}) {
      const std::map<std::string, Buffer> in{{"x", testing::random_buffer(DType::F32, {rows, H}, static_cast<uint32_t>(61 + rows))},
                                             {"gain", testing::random_buffer(DType::BF16, {H}, 62)},
                                             {"router", testing::random_buffer(DType::BF16, {E, H}, 63)},
                                             {"w_gu", testing::random_buffer(DType::BF16, {E, 2 * I, H}, 64, -0.05f, 0.05f)},
                                             {"w_d", testing::random_buffer(DType::BF16, {E, H, I}, 65, -0.05f, 0.05f)}};
      Interpreter ref(g);
      for (const auto& [name, b] : in) {
        ref.set_input(name, b);
        cuda.set_input(name, b);
      }
      ref.run();
      const int64_t before = cuda.small_groups_folded();
      for (int rep = 0; rep < 3; ++rep) {  // the second run records a CUDA graph, the third replays it
        cuda.run();
        const std::string at = " (s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) + (on ? "" : ", no fold") + ")";
        for (const char* name : {"weights", "out"}) {
          const Buffer want = ref.output(name), got = cuda.output(name);
          ASSERT_EQ(got.numel(), want.numel());
          for (size_t i = 0; i < want.numel(); ++i)
            ASSERT_NEAR(got.get(i), want.get(i), 2e-5 * (1 + std::abs(want.get(i)))) << name << "[" << i << "]" << at;
        }
        if (rep == 0) {
          EXPECT_EQ(cuda.small_groups_folded() > before, on && rows == 1) << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace luminal::cuda
