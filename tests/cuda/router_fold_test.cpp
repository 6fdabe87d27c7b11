// A decode's MoE router computed inside its o projection's launch (fold_routers_through_o,
// NodeKernels::router_logits, CudaOptions::routers_through_o): which routers fold, the twins'
// code, and on the GPU an attention output's o projection and MoE block, folded and not,
// against the reference.
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

using testing::moe_tiny_decoder_plan;

// Every layer of an MoE decoder but the first (whose sum reads the embedding's bf16 rows, a
// Fused cast and add, not an Add) folds its router into its o projection: the o projection's
// schedules get twins with the logits' blocks ahead of the GEMV's, the group a function that
// takes h and scales the logits it reads, and M and A a function that makes them. Off, none.
TEST(CudaCodegen, RoutersFoldIntoTheirOProjections) {
  const Graph plan = moe_tiny_decoder_plan();
  for (bool on : {true, false}) {
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.routers_through_o = on});
    int folded = 0;
    for (const SmallGroup& grp : k.small_groups) {
      if (!grp.router_through_o) continue;
      ++folded;
      const RouterThroughO& f = *grp.router_through_o;
      EXPECT_EQ(plan.node(f.router).kernel, "Matmul");
      EXPECT_EQ(plan.node(f.norm).kernel, "RMSNormMul");
      EXPECT_EQ(plan.node(f.sum).op, OpKind::Add);
      EXPECT_EQ(plan.node(f.o).kernel, "Matmul");
      EXPECT_EQ(plan.node(f.router).inputs[0].src, f.norm);
      EXPECT_EQ(plan.node(f.norm).inputs[0].src, f.sum);
      EXPECT_EQ(f.experts, fixture_config("qwen3-moe-tiny").experts);
      const NodeKernels& of = *k.per_node[f.o];
      ASSERT_TRUE(of.router_logits);
      const NodeKernels& twin = *of.router_logits;
      ASSERT_EQ(twin.launches.size(), 1u);
      ASSERT_EQ(twin.alternatives.size(), of.alternatives.size());
      for (size_t v = 0; v <= twin.alternatives.size(); ++v) {
        const Launch& l = v == 0 ? twin.launches[0] : twin.alternatives[v - 1];
        EXPECT_EQ(l.extra_blocks, (f.experts + 1) / 2);
        const std::string* text = k.functions.find(l.function);
        ASSERT_NE(text, nullptr);
        EXPECT_NE(text->find("char* __restrict__ lm_rl, const long long* __restrict__ lm_dims)"), std::string::npos);
        // The logits' blocks after the wait and before the GEMV's, which see the rest of the grid.
        EXPECT_LT(text->find("lm_grid_wait();"), text->find("if (blockIdx.x < " + std::to_string(l.extra_blocks) + ")"));
        EXPECT_NE(text->find("(gridDim.x - " + std::to_string(l.extra_blocks) + ")"), std::string::npos);
      }
      const std::string* group = k.functions.find(f.group_function);
      ASSERT_NE(group, nullptr);
      EXPECT_NE(group->find("const char* __restrict__ lm_rh, const long long* __restrict__ lm_dims)"), std::string::npos);
      EXPECT_NE(group->find("lm_l0_scaled"), std::string::npos);
      // h's loads in a loop of known trips for blocks of 256 threads (any other size: the loop
      // of runtime bounds).
      EXPECT_NE(group->find("if (blockDim.x == 256) {"), std::string::npos);
      // Each layer's group the same function (no node ids in its text).
      EXPECT_EQ(f.group_function, k.small_groups.back().router_through_o->group_function);
      EXPECT_NE(k.functions.find(f.prep_function), nullptr);
    }
    EXPECT_EQ(folded, on ? fixture_config("qwen3-moe-tiny").layers - 1 : 0) << "fold " << on;
    if (on && nvrtc_unavailable_reason().empty()) {
      PlanKernels all = generate_plan_kernels(plan, CodegenOptions{.routers_through_o = true});
      all.drop_alternatives();
      EXPECT_NO_THROW(nvrtc_compile(all.source(), "sm_90", ""));
    }
  }
}

// An MoE decoder's expert sums load their dims before their wait: a branch on the dims there
// (gen::dims_before_wait) keeps ptxas from sinking the loads past griddepcontrol.wait. The
// GEMVs, slower with it, do not.
TEST(CudaCodegen, ExpertSumsLoadTheirDimsBeforeTheirWait) {
  const Graph plan = moe_tiny_decoder_plan();
  const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.routers_through_o = true});
  const std::string pin = "< 0) __trap();  // the dims loaded before the wait";
  size_t sums = 0, gemvs = 0;
  for (NodeId id = 0; id < plan.size(); ++id) {
    if (!k.per_node[id]) continue;
    const NodeKernels& nk = *k.per_node[id];
    for (const NodeKernels* form : std::initializer_list<const NodeKernels*>{nk.expert_sum.get(), nk.expert_sum_early.get(), nk.linear ? &nk : nullptr}) {
      if (!form) continue;
      const bool sum = form != &nk;
      for (const Launch& l : form->launches) {
        const std::string* text = k.functions.find(l.function);
        ASSERT_NE(text, nullptr);
        const size_t wait = text->find("lm_grid_wait();"), at = text->find(pin);
        if (sum) {
          ++sums;
          EXPECT_LT(text->find(" = lm_dims["), at) << l.function;
          EXPECT_LT(at, wait) << l.function;
        } else {
          ++gemvs;
          EXPECT_EQ(at, std::string::npos) << l.function;
        }
      }
    }
  }
  EXPECT_EQ(sums, 2u * fixture_config("qwen3-moe-tiny").layers);
  EXPECT_GT(gemvs, 0u);
}

// A decode layer's o projection and MoE block (the routing as moe_block in group_fold_test.cpp):
// h = x + attn · W_oᵀ, its norm, the router, the routing, the experts and the residual.
Graph o_and_moe_block(int64_t E, int64_t K, int64_t I, int64_t H, int64_t A) {
  Graph g;
  const Expr s = Expr::var("s");
  // x computed, as a decoder's residual stream is (an input is never a GEMV's residual): a sum
  // of two rows, also an output, so that it stays a kernel of its own.
  Tensor x = sum(input(g, "x", DType::F32, {s, Expr(2), H}), {1});
  x.output("x");
  Tensor attn = input(g, "attn", DType::F32, {s, A});
  Tensor h = x + linear(attn, cast(input(g, "w_o", DType::BF16, {H, A}), DType::F32), std::nullopt);
  testing::moe_routing_and_experts(g, h, rms_norm(h, cast(input(g, "gain", DType::BF16, {H}), DType::F32), 1e-6), E, K, I, H);
  return g;
}

// One token, then three, then one, each run three times (the second records a CUDA graph, the
// third replays it), against the reference, with the fold and without. With the fold, one
// token's first run folds the router (three don't). Then new router weights for one token: M and
// A are stale, so the recorded graphs go and the router runs on its own.
TEST(CudaBackend, RoutersThroughTheirOProjectionsMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  // A of 1024: the o projection's first schedule loads its first pass before its wait (twins see
  // their own grid there too). M is made in chunks of 16 experts: one whole, one part.
  constexpr int64_t E = 24, K = 4, I = 64, H = 256, A = 1024;
  const Graph g = o_and_moe_block(E, K, I, H, A);
  const Graph plan = compiled(g);
  // The fold with the routing group in the o projection's last block, inside the gate/up
  // experts (fold_groups: they scale the logits themselves), launched on its own, and no fold.
  struct Way {
    bool on, routing, in_experts;
  };
  for (const Way way : {Way{true, true, false}, Way{true, false, true}, Way{true, false, false}, Way{false, false, false}}) {
    const bool on = way.on, routing = way.routing;
    CudaExecutor cuda(plan, "",
                      CudaOptions{.tensor_cores = false, .tune_variants = false, .fold_groups = way.in_experts, .routers_through_o = on, .routing_in_o = routing});
    std::map<std::string, Buffer> in{{"gain", testing::random_buffer(DType::BF16, {H}, 81)},
                                     {"router", testing::random_buffer(DType::BF16, {E, H}, 82)},
                                     {"w_o", testing::random_buffer(DType::BF16, {H, A}, 83, -0.1f, 0.1f)},
                                     {"w_gu", testing::random_buffer(DType::BF16, {E, 2 * I, H}, 84, -0.05f, 0.05f)},
                                     {"w_d", testing::random_buffer(DType::BF16, {E, H, I}, 85, -0.05f, 0.05f)}};
    for (const auto& [name, b] : in) cuda.set_input(name, b);
    int step = 0;
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{1}, int64_t{1}}) {
      if (++step == 4) cuda.set_input("router", in["router"] = testing::random_buffer(DType::BF16, {E, H}, 86));
      in["x"] = testing::random_buffer(DType::F32, {rows, 2, H}, static_cast<uint32_t>(90 + step));
      in["attn"] = testing::random_buffer(DType::F32, {rows, A}, static_cast<uint32_t>(95 + step));
      cuda.set_input("x", in["x"]);
      cuda.set_input("attn", in["attn"]);
      Interpreter ref(g);
      for (const auto& [name, b] : in) ref.set_input(name, b);
      ref.run();
      const int64_t before = cuda.routers_through_o(), groups_before = cuda.routing_groups_in_o(), folded_before = cuda.small_groups_folded();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        const std::string at = " (step " + std::to_string(step) + ", s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) +
                               (on ? "" : ", no fold") + (routing ? ", routing in o" : "") + (way.in_experts ? ", routing in the experts" : "") + ")";
        for (const char* name : {"weights", "out"})
          ASSERT_NO_FATAL_FAILURE(testing::assert_near_buffers(ref.output(name), cuda.output(name), 2e-5, name, at));
        if (rep == 0) {
          EXPECT_EQ(cuda.routers_through_o() > before, on && rows == 1 && step < 4) << at;
          EXPECT_EQ(cuda.routing_groups_in_o() > groups_before, on && routing && rows == 1 && step < 4) << at;
          EXPECT_EQ(cuda.small_groups_folded() > folded_before, way.in_experts && rows == 1 && step < 4) << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace luminal::cuda
