// A decode's routing group inside its gate/up experts' GEMV (fold_small_groups,
// NodeKernels::routed, CudaOptions::fold_groups) or inside its router's last block
// (fold_groups_into_producers, NodeKernels::group_tail, CudaOptions::groups_in_producers):
// which groups fold, the twins' code, and on the GPU an MoE block's outputs with and without
// each fold against the reference.
#include <gtest/gtest.h>

#include <functional>

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

using testing::moe_tiny_decoder_plan;

// Each layer of an MoE decoder: its routing group (one block: top-k ranks) folds into its gate/up
// experts, whose gated forms (plain and normed) get twins that take the group's outputs and
// leaves, run its code after their wait and read their scales from its shared copy. Off, none.
TEST(CudaCodegen, RoutingGroupsFoldIntoTheirGateUpExperts) {
  const Graph plan = moe_tiny_decoder_plan();
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

// Each layer of an MoE decoder: its routing group (one block, one computed leaf: the router's
// logits) folds into its router, whose normed GEMV forms get twins that take the group's outputs
// and a counter, and whose last block runs the group reading the logits it stored. Off, none;
// with the gate/up fold on, that one takes the groups.
TEST(CudaCodegen, RoutingGroupsFoldIntoTheirRoutersLastBlock) {
  const Graph plan = moe_tiny_decoder_plan();
  for (bool on : {true, false}) {
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.groups_in_producers = on});
    int folded = 0;
    for (const SmallGroup& grp : k.small_groups) {
      if (!grp.tail_producer) continue;
      ++folded;
      const Node& r = plan.node(*grp.tail_producer);
      EXPECT_EQ(r.kernel, "Matmul");
      ASSERT_EQ(grp.leaves.size(), 1u);
      EXPECT_EQ(grp.leaves[0], *grp.tail_producer);
      const NodeKernels& normed = *k.per_node[*grp.tail_producer]->normed;
      ASSERT_TRUE(normed.group_tail);
      const NodeKernels& twin = *normed.group_tail;
      ASSERT_EQ(twin.launches.size(), normed.launches.size());
      ASSERT_EQ(twin.alternatives.size(), normed.alternatives.size());
      for (size_t v = 0; v <= twin.alternatives.size(); ++v) {
        const std::string* text = k.functions.find(v == 0 ? twin.launches[0].function : twin.alternatives[v - 1].function);
        ASSERT_NE(text, nullptr);
        // Outputs, then the counter; the leaf is the GEMV's own output, not a parameter.
        EXPECT_NE(text->find("char* __restrict__ lm_go0, "), std::string::npos);
        EXPECT_NE(text->find("char* __restrict__ lm_gcnt, const long long* __restrict__ lm_dims)"), std::string::npos);
        EXPECT_EQ(text->find("lm_gl0"), std::string::npos);
        EXPECT_NE(text->find("top-k ranks"), std::string::npos);
        // The group after the GEMV's stores, in the last block only, storing every member.
        EXPECT_LT(text->find("lm_out)[lm_z]"), text->find("if (!lm_last) return;"));
        EXPECT_LT(text->find("if (!lm_last) return;"), text->find("lm_gs0["));
        EXPECT_EQ(text->find("blockIdx.x == 0"), std::string::npos);
      }
    }
    EXPECT_EQ(folded, on ? fixture_config("qwen3-moe-tiny").layers : 0) << "fold " << on;
    if (on && nvrtc_unavailable_reason().empty()) {
      PlanKernels all = generate_plan_kernels(plan, CodegenOptions{.groups_in_producers = true});
      all.drop_alternatives();
      EXPECT_NO_THROW(nvrtc_compile(all.source(), "sm_90", ""));
    }
  }
  const PlanKernels both = generate_plan_kernels(plan, CodegenOptions{.fold_groups = true, .groups_in_producers = true});
  for (const SmallGroup& grp : both.small_groups) EXPECT_FALSE(grp.tail_producer && grp.fold_reader);
}

// An MoE block as the decoder writes it (src/models/decoder_graph.cpp): the norm, the router,
// its softmax, top-k ranks and renormalised weights, the gate/up experts scaled by the choice,
// act(gate) * up, the down experts scaled by the weights, their sum and the residual.
Graph moe_block(int64_t E, int64_t K, int64_t I, int64_t H) {
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, H});
  testing::moe_routing_and_experts(g, x, rms_norm(x, cast(input(g, "gain", DType::BF16, {H}), DType::F32), 1e-6), E, K, I, H);
  return g;
}

// An MoE block (moe_block) of one token, then three, then one, each run three times (the
// second records a CUDA graph, the third replays it), against the reference, with the fold that
// `with` turns on and without. After each first run, `folds` (the executor's count of that
// fold) must have grown where the fold is on and one token runs, and the groups' count where
// one token runs (folded or launched, the group ran).
void check_moe_block_folds(const std::function<CudaOptions(bool)>& with, const std::function<int64_t(const CudaExecutor&)>& folds, uint32_t seed) {
  constexpr int64_t E = 16, K = 4, I = 64, H = 256;
  const Graph g = moe_block(E, K, I, H);
  const Graph plan = compiled(g);
  for (bool on : {true, false}) {
    CudaExecutor cuda(plan, "", with(on));
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{1}}) {
      const std::map<std::string, Buffer> in{{"x", testing::random_buffer(DType::F32, {rows, H}, static_cast<uint32_t>(seed + rows))},
                                             {"gain", testing::random_buffer(DType::BF16, {H}, seed + 1)},
                                             {"router", testing::random_buffer(DType::BF16, {E, H}, seed + 2)},
                                             {"w_gu", testing::random_buffer(DType::BF16, {E, 2 * I, H}, seed + 3, -0.05f, 0.05f)},
                                             {"w_d", testing::random_buffer(DType::BF16, {E, H, I}, seed + 4, -0.05f, 0.05f)}};
      Interpreter ref(g);
      for (const auto& [name, b] : in) {
        ref.set_input(name, b);
        cuda.set_input(name, b);
      }
      ref.run();
      const int64_t before = folds(cuda), launched = cuda.small_groups_run();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        const std::string at = " (s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) + (on ? "" : ", no fold") + ")";
        for (const char* name : {"weights", "out"})
          ASSERT_NO_FATAL_FAILURE(testing::assert_near_buffers(ref.output(name), cuda.output(name), 2e-5, name, at));
        if (rep == 0) {
          EXPECT_EQ(folds(cuda) > before, on && rows == 1) << at;
          EXPECT_EQ(cuda.small_groups_run() > launched, rows == 1) << at;
        }
      }
    }
  }
}

// One token: with the fold the routing group launches nothing (it runs in the gate/up experts'
// blocks, block 0 storing the weights the down experts read), and the outputs are the
// reference's; three tokens: no group, no fold.
TEST(CudaBackend, FoldedRoutingGroupsMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  check_moe_block_folds([](bool on) { return CudaOptions{.tensor_cores = false, .tune_variants = false, .fold_groups = on}; },
                        [](const CudaExecutor& c) { return c.small_groups_folded(); }, 61);
}

// One token: with the fold the routing group launches nothing (the router's last block runs it
// and stores the weights the experts read; the counter is left zero for the next launch and the
// replays), and the outputs are the reference's; three tokens: no group, no fold.
TEST(CudaBackend, RoutingGroupsInTheirRoutersLastBlockMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  check_moe_block_folds([](bool on) { return CudaOptions{.tensor_cores = false, .tune_variants = false, .groups_in_producers = on}; },
                        [](const CudaExecutor& c) { return c.small_groups_in_producers(); }, 71);
}

}  // namespace
}  // namespace luminal::cuda
