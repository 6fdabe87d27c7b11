// An MoE's routing as the decoder writes it, on the GPU: a softmax with one row computed by its
// first reader (NodeKernels::softmax_fold, CudaOptions::softmax_in_readers), and the nodes after
// the router as one small group (SmallGroup, CudaOptions::small_groups).
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "cuda/cuda_cases.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

constexpr int64_t kHidden = 24;

// The router's softmax, each expert's rank among a token's (larger, or equal at a lower index)
// as a fused count, chosen when under k, and the chosen probabilities renormalised
// (src/models/decoder_graph.cpp, route()). `normed`: the router reads an RMS norm of x with a
// bf16 gain, as the decoder's does.
// `mixed`: that many rows of a linear layer over the weights after them (output "mixed").
Graph routing(int64_t experts = 16, int64_t k = 4, int64_t hidden = kHidden, bool normed = false, int64_t mixed = 0) {
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, hidden});
  if (normed) x = rms_norm(x, cast(input(g, "gain", DType::BF16, {hidden}), DType::F32), 1e-6);
  Tensor router = cast(input(g, "router", DType::BF16, {experts, hidden}), DType::F32);
  Tensor probs = softmax(linear(x, router, std::nullopt), -1);
  Tensor chosen = testing::top_k_chosen(g, probs, experts, k);
  Tensor w = probs * chosen;
  Tensor weights = w / sum(w, {-1}, true);
  weights.output("weights");
  chosen.output("chosen");
  if (mixed > 0) linear(weights, cast(input(g, "mix", DType::BF16, {mixed, experts}), DType::F32), std::nullopt).output("mixed");
  return g;
}

using testing::compiled;

// The softmax's first reader in the plan is the count, a fused reduction: it has the form.
TEST(CudaCodegen, ASoftmaxsFirstReaderCanComputeIt) {
  const Graph plan = compiled(routing());
  const PlanKernels k = generate_plan_kernels(plan);
  int softmaxes = 0, folds = 0;
  for (NodeId id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(id);
    softmaxes += n.op == OpKind::Kernel && n.kernel == "Softmax";
    if (!k.per_node[id] || !k.per_node[id]->softmax_fold) continue;
    ++folds;
    EXPECT_EQ(plan.node(k.per_node[id]->softmax_node).kernel, "Softmax");
    EXPECT_TRUE(k.per_node[id]->softmax_fold->launches.at(0).softmax_out);
  }
  EXPECT_EQ(softmaxes, 1) << plan.dump();
  EXPECT_GE(folds, 1) << plan.dump();  // the count, and the weights' readers of the softmax
  if (!nvrtc_unavailable_reason().empty()) GTEST_SKIP() << nvrtc_unavailable_reason();
  EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", ""));
}

// A softmax over a long row (a vocabulary) stays a kernel of its own: each of its reader's
// blocks would pass over the whole row.
TEST(CudaCodegen, ALongSoftmaxIsNotFoldedIntoItsReader) {
  Graph g;
  Tensor logits = input(g, "logits", DType::F32, {Expr::var("s"), 5000});
  (softmax(logits, -1) * 2.0f + 1.0f).output("y");
  const Graph plan = compiled(g);
  const PlanKernels k = generate_plan_kernels(plan);
  int softmaxes = 0;
  for (NodeId id = 0; id < plan.size(); ++id) {
    softmaxes += plan.node(id).op == OpKind::Kernel && plan.node(id).kernel == "Softmax";
    EXPECT_FALSE(k.per_node[id] && k.per_node[id]->softmax_fold) << plan.node(id).kernel;
  }
  EXPECT_EQ(softmaxes, 1) << plan.dump();
}

// One token: the softmax launches nothing and the chosen experts and weights are the
// reference's; three tokens: the softmax runs. Recorded and replayed graphs, with and without.
TEST(CudaBackend, OneRowSoftmaxesFoldIntoTheirFirstReader) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const Graph g = routing();
  const Graph plan = compiled(g);
  for (bool fold : {true, false}) {
    CudaExecutor cuda(plan, "", CudaOptions{.softmax_in_readers = fold, .small_groups = false});
    // The last round replays s=1's graph on new values.
    const std::vector<int64_t> rounds{1, 3, 1};
    for (size_t round = 0; round < rounds.size(); ++round) {
      const int64_t s = rounds[round];
      const int64_t before = cuda.softmaxes_folded();
      Interpreter ref(g);
      const Buffer x = testing::random_buffer(DType::F32, {s, kHidden}, static_cast<uint32_t>(round * 7 + 1), -1, 1);
      const Buffer router = testing::random_buffer(DType::BF16, {16, kHidden}, 3, -1, 1);
      ref.set_input("x", x);
      ref.set_input("router", router);
      cuda.set_input("x", x);
      cuda.set_input("router", router);
      ref.run();
      for (int rep = 0; rep < 3; ++rep) {  // the second run records a CUDA graph, the third replays it
        cuda.run();
        for (const char* name : {"chosen", "weights"}) {
          const Buffer want = ref.output(name), got = cuda.output(name);
          ASSERT_EQ(got.numel(), want.numel());
          for (size_t i = 0; i < want.numel(); ++i)
            ASSERT_NEAR(got.get(i), want.get(i), 1e-6) << name << "[" << i << "] s=" << s << " run " << rep + 1 << (fold ? "" : " (no fold)");
        }
      }
      // Runs launched one by one fold (a replayed graph launches nothing itself).
      if (round < 2) {
        EXPECT_EQ(cuda.softmaxes_folded() > before, fold && s == 1) << "s=" << s;
      }
    }
  }
}

// After the router, the softmax, the ranks, the weights' sum and the weights are one small
// group. The ranks are recognised as top-k ranks (cuda_top_ranks.h) and run as 8 rounds of argmax
// in a warp, so the group is one block; with that off (CodegenOptions::top_ranks_in_groups), for
// 128 experts the ranks (16384 comparisons) are shared out over blocks, which count themselves by
// one acquire-release atomic each, and the last to finish runs the sum and the weights. With the
// router in the group (CodegenOptions::router_in_group) it is the first member: for 128 experts
// its rows (a warp each) are shared out too, and the blocks meet at a grid barrier before the
// softmax where the ranks are shared out after it, or the last block runs the rest where not.
// The lower-index table (two Iotas compared) is computed where the ranks read it, not loaded
// (CodegenOptions::index_values_in_groups), unless that is off.
TEST(CudaCodegen, TheRoutingAfterTheRouterIsOneSmallGroup) {
  for (bool top_ranks : {true, false})
  for (bool index_values : {true, false})
  for (bool router : {false, true})
    for (int64_t experts : {16, 128}) {
      const Graph plan = compiled(routing(experts, 8));
      const PlanKernels k = generate_plan_kernels(
          plan, CodegenOptions{.router_in_group = router, .index_values_in_groups = index_values, .top_ranks_in_groups = top_ranks});
      ASSERT_EQ(k.small_groups.size(), 1u) << plan.dump();
      const SmallGroup& grp = k.small_groups[0];
      std::vector<std::string> kinds;
      for (NodeId id : grp.nodes) kinds.push_back(plan.node(id).kernel);
      std::vector<std::string> want{"Softmax", "FusedSum", "FusedSum", "Fused"};
      std::vector<int64_t> capacity{experts, experts, 1, experts};
      if (router) want.insert(want.begin(), "Matmul"), capacity.insert(capacity.begin(), experts);
      EXPECT_EQ(kinds, want) << plan.dump();
      // The router's logits (or x and its weights), and the lower-index table where it is loaded.
      EXPECT_EQ(grp.leaves.size(), (router ? 2u : 1u) + (index_values ? 0u : 1u)) << plan.dump();
      EXPECT_EQ(std::count_if(grp.leaves.begin(), grp.leaves.end(), [&](NodeId l) { return plan.node(l).op == OpKind::LessThan; }),
                index_values ? 0 : 1)
          << plan.dump();
      EXPECT_EQ(grp.capacity, capacity);
      const bool ranks_shared = experts == 128 && !top_ranks, router_shared = experts == 128 && router;
      const std::string at = std::string(" top ranks ") + (top_ranks ? "on" : "off") + (router ? ", router" : "") + " experts " + std::to_string(experts);
      EXPECT_EQ(grp.counter, ranks_shared || router_shared) << at;
      EXPECT_EQ(grp.launch.work.as_const().value_or(0), ranks_shared || router_shared ? 16 : 1) << at;
      const std::string* found = k.functions.find(grp.launch.function);
      ASSERT_NE(found, nullptr);
      // The last block counts the blocks by one acquire-release atomic each (gen::last_block_count);
      // a split member before another meets the others at a grid barrier (gen::grid_barrier).
      const std::string& text = *found;
      EXPECT_EQ(text.find("lm_atom_add1_acq_rel_gpu(") != std::string::npos, ranks_shared || router_shared) << at;
      EXPECT_EQ(text.find("lm_atom_inc_acq_rel_gpu(") != std::string::npos, ranks_shared && router_shared) << at;
      EXPECT_EQ(text.find("top-k ranks: 8 rounds") != std::string::npos, top_ranks) << at;
      EXPECT_EQ(text.find("__threadfence()"), std::string::npos);
      EXPECT_EQ(text.find(" lm_iv") != std::string::npos, index_values);
      // As one warp where asked, one block and no router (its rows take a block's warps).
      const PlanKernels w = generate_plan_kernels(plan, CodegenOptions{.router_in_group = router, .index_values_in_groups = index_values,
                                                                       .top_ranks_in_groups = top_ranks, .warp_groups = true});
      EXPECT_EQ(w.small_groups.at(0).launch.row_length.as_const().value_or(0), grp.counter || router ? 0 : 1) << at;
      EXPECT_TRUE(grp.launch.row_length.is_const(0)) << at;
    }
  if (!nvrtc_unavailable_reason().empty()) GTEST_SKIP() << nvrtc_unavailable_reason();
  PlanKernels k = generate_plan_kernels(compiled(routing(128, 8)));
  k.drop_alternatives();
  EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", ""));
}

// The group runs for one token (CudaExecutor::runs_small_group), so a member not shared out over
// blocks has rows and a row length known when the code is written: its lanes' values in loops of
// known trips, unrolled (GroupWriter::one_token_rows). A shared-out member keeps the loops of
// runtime bounds. The members' labels carry no node id, so equal groups have one text.
TEST(CudaCodegen, OneTokensRoutingGroupHasRowLoopsOfKnownBounds) {
  for (bool top_ranks : {true, false}) {
    const Graph plan = compiled(routing(128, 8));
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.top_ranks_in_groups = top_ranks});
    ASSERT_EQ(k.small_groups.size(), 1u) << plan.dump();
    const std::string* text = k.functions.find(k.small_groups[0].launch.function);
    ASSERT_NE(text, nullptr);
    // The softmax (one row of 128) and the chosen probabilities' sum.
    const std::string known = "const long long lm_rows = 1, lm_len = 128;  // one token\n    constexpr int lm_tpr = 32;\n";
    size_t count = 0;
    for (size_t at = text->find(known); at != std::string::npos; at = text->find(known, at + 1)) ++count;
    EXPECT_EQ(count, 2u) << *text;
    // Shared out, the ranks' 128 rows keep the runtime loop.
    EXPECT_EQ(text->find("while (lm_tpr > 1") != std::string::npos, !top_ranks) << *text;
    EXPECT_EQ(text->find("// %"), std::string::npos) << *text;
  }
}

// A router reading an RMS norm folds it in as the normed GEMVs do: the group reads the norm's x
// and gain, not the norm (whose GEMVs may leave it unmade). The decoder's shape: 2048 values, 128
// experts.
TEST(CudaCodegen, ARouterOverANormReadsTheNormsInputs) {
  const Graph plan = compiled(routing(128, 8, 2048, true));
  const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.router_in_group = true});
  ASSERT_EQ(k.small_groups.size(), 1u) << plan.dump();
  const SmallGroup& grp = k.small_groups[0];
  EXPECT_EQ(plan.node(grp.nodes[0]).kernel, "Matmul");
  std::vector<std::string> leaves;
  for (NodeId id : grp.leaves) leaves.push_back(plan.node(id).kernel.empty() ? op_name(plan.node(id).op) : plan.node(id).kernel);
  EXPECT_EQ(leaves.size(), 3u) << plan.dump();  // x, the gain, the router's weights (the lower-index table computed)
  for (const std::string& l : leaves) EXPECT_EQ(l.find("RMSNorm"), std::string::npos) << plan.dump();
  EXPECT_EQ(grp.launch.work.as_const().value_or(0), 16);
  if (!nvrtc_unavailable_reason().empty()) GTEST_SKIP() << nvrtc_unavailable_reason();
  PlanKernels all = generate_plan_kernels(plan, CodegenOptions{.router_in_group = true});
  all.drop_alternatives();
  EXPECT_NO_THROW(nvrtc_compile(all.source(), "sm_90", ""));
}

// Nodes of more than one token's size, or reading a norm whose GEMVs may fold it in, form no group.
TEST(CudaCodegen, WideOrDeferrableValuesFormNoSmallGroup) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 2048});
  Tensor y = x * 2.0f + 1.0f;
  (y / sum(y, {-1}, true)).output("wide");
  Tensor n = rms_norm(input(g, "v", DType::F32, {Expr::var("s"), 8}), std::nullopt, 1e-6);
  Tensor e = exp(n);
  (e / sum(e, {-1}, true)).output("after_norm");
  const Graph plan = compiled(g);
  const PlanKernels k = generate_plan_kernels(plan);
  for (const SmallGroup& grp : k.small_groups)
    for (NodeId l : grp.leaves) EXPECT_NE(plan.node(l).kernel, "RMSNorm") << plan.dump();
  for (const SmallGroup& grp : k.small_groups)
    for (NodeId m : grp.nodes) EXPECT_LE(plan.node(m).shape.back().as_const().value_or(0), kSmallGroupMaxValues) << plan.dump();
}

// One token: the group's one launch gives the reference's chosen experts and weights (16 and 128
// experts; with the router in the group, without, groups off); three tokens: the members
// launch as before. Recorded and replayed graphs.
TEST(CudaBackend, SmallGroupsMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (int64_t experts : {16, 128}) {
    const Graph g = routing(experts, 8);
    const Graph plan = compiled(g);
    // With the router in the group, without it, no groups; the lower-index table loaded; the
    // group as one warp (CudaOptions::warp_groups).
    for (int on : {2, 1, 0, 3, 4}) {
      CudaExecutor cuda(plan, "",
                        CudaOptions{.small_groups = on > 0, .router_in_group = on == 2, .index_values_in_groups = on != 3, .warp_groups = on == 4});
      const std::vector<int64_t> rounds{1, 3, 1};
      for (size_t round = 0; round < rounds.size(); ++round) {
        const int64_t s = rounds[round];
        const int64_t before = cuda.small_groups_run();
        Interpreter ref(g);
        const Buffer x = testing::random_buffer(DType::F32, {s, kHidden}, static_cast<uint32_t>(round * 11 + experts), -1, 1);
        Buffer router = testing::random_buffer(DType::BF16, {experts, kHidden}, 5, -1, 1);
        // In the last round every expert's row is the first's: all logits tie, and the lower
        // index alone chooses (the first 8), which a wrong tie-break table would not.
        if (round == 2)
          for (int64_t e = 1; e < experts; ++e)
            for (int64_t i = 0; i < kHidden; ++i) router.set(static_cast<size_t>(e * kHidden + i), router.get(static_cast<size_t>(i)));
        ref.set_input("x", x);
        ref.set_input("router", router);
        cuda.set_input("x", x);
        cuda.set_input("router", router);
        ref.run();
        for (int rep = 0; rep < 3; ++rep) {
          cuda.run();
          for (const char* name : {"chosen", "weights"}) {
            const Buffer want = ref.output(name), got = cuda.output(name);
            ASSERT_EQ(got.numel(), want.numel());
            for (size_t i = 0; i < want.numel(); ++i)
              ASSERT_NEAR(got.get(i), want.get(i), 1e-6)
                  << name << "[" << i << "] experts=" << experts << " s=" << s << " run " << rep + 1 << " groups " << on;
          }
        }
        if (round < 2) {
          EXPECT_EQ(cuda.small_groups_run() > before, on > 0 && s == 1) << "experts=" << experts << " s=" << s;
        }
      }
    }
  }
}

// The routing, then a linear layer of its weights (so that one follows the group in the plan's
// order, as the next layer's q/k/v follows a decode's routing).
Graph routing_then_linear(int64_t experts, int64_t k) { return routing(experts, k, kHidden, false, 40); }

// With CodegenOptions::group_prefetch every group's function takes (lm_pf, lm_pfn) before the
// dims and asks L2 for those bytes by bulk requests before its wait; without, neither.
TEST(CudaCodegen, GroupsCanAskL2ForTheWeightsAfterThem) {
  const Graph plan = compiled(routing_then_linear(128, 8));
  for (bool on : {false, true}) {
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.group_prefetch = on});
    ASSERT_EQ(k.small_groups.size(), 1u) << plan.dump();
    EXPECT_EQ(k.small_groups[0].prefetch, on);
    const std::string* text = k.functions.find(k.small_groups[0].launch.function);
    ASSERT_NE(text, nullptr);
    const size_t bulk = text->find("lm_prefetch_l2_bulk(lm_pf"), wait = text->find("lm_grid_wait();");
    EXPECT_EQ(bulk != std::string::npos, on);
    EXPECT_EQ(text->find("unsigned long long lm_pfn, const long long* __restrict__ lm_dims)") != std::string::npos, on);
    if (on) {
      EXPECT_LT(bulk, wait);  // ahead of the wait: the weights are never written
    }
  }
  if (!nvrtc_unavailable_reason().empty()) GTEST_SKIP() << nvrtc_unavailable_reason();
  PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.group_prefetch = true});
  k.drop_alternatives();
  EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", ""));
}

// A group asking L2 for the next linear layer's weights (CudaOptions::group_prefetch_bytes, all
// of them and a budget smaller than them, which must stay a whole number of 16-byte requests)
// gives the reference's values: the parameters land where the function reads them (the dims
// after them), and the emulator checks each request's alignment and reads both its ends.
TEST(CudaBackend, GroupsAskingL2ForTheNextWeightsChangeNoValue) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  constexpr int64_t kExperts = 16;
  const Graph g = routing_then_linear(kExperts, 4);
  const Graph plan = compiled(g);
  for (int64_t budget : {int64_t{1} << 20, int64_t{1000}, int64_t{0}}) {
    CudaExecutor cuda(plan, "", CudaOptions{.group_prefetch_bytes = budget});
    for (int64_t s : {1, 3, 1}) {
      const int64_t before = cuda.small_groups_run();
      Interpreter ref(g);
      const Buffer x = testing::random_buffer(DType::F32, {s, kHidden}, static_cast<uint32_t>(s * 7 + budget % 97), -1, 1);
      const Buffer router = testing::random_buffer(DType::BF16, {kExperts, kHidden}, 5, -1, 1);
      const Buffer mix = testing::random_buffer(DType::BF16, {40, kExperts}, 9, -1, 1);
      for (const auto& [name, value] : {std::pair{"x", &x}, {"router", &router}, {"mix", &mix}}) {
        ref.set_input(name, *value);
        cuda.set_input(name, *value);
      }
      ref.run();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        for (const char* name : {"chosen", "weights", "mixed"}) {
          const Buffer want = ref.output(name), got = cuda.output(name);
          ASSERT_EQ(got.numel(), want.numel());
          for (size_t i = 0; i < want.numel(); ++i)
            ASSERT_NEAR(got.get(i), want.get(i), 1e-5) << name << "[" << i << "] s=" << s << " run " << rep + 1 << " budget " << budget;
        }
      }
      EXPECT_EQ(cuda.small_groups_run() > before, s == 1) << "s=" << s << " budget " << budget;
    }
  }
}

// The decoder's router shape over an RMS norm (2048 values, 128 experts, 8 chosen): the group's
// one launch (router rows shared out, a grid barrier, the ranks shared out, the last block's
// weights) gives the reference's chosen experts and weights, with the norm folded; three tokens
// run the nodes one by one. Recorded and replayed graphs.
TEST(CudaBackend, ARouterOverANormRunsInItsGroup) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  constexpr int64_t kExperts = 128, kWide = 2048;
  const Graph g = routing(kExperts, 8, kWide, true);
  const Graph plan = compiled(g);
  for (bool on : {true, false}) {
    CudaExecutor cuda(plan, "", CudaOptions{.small_groups = on, .router_in_group = true});
    const std::vector<int64_t> rounds{1, 3, 1};
    for (size_t round = 0; round < rounds.size(); ++round) {
      const int64_t s = rounds[round];
      const int64_t before = cuda.small_groups_run();
      Interpreter ref(g);
      const Buffer x = testing::random_buffer(DType::F32, {s, kWide}, static_cast<uint32_t>(round * 13 + 2), -2, 2);
      const Buffer gain = testing::random_buffer(DType::BF16, {kWide}, 7, 0.5, 1.5);
      const Buffer router = testing::random_buffer(DType::BF16, {kExperts, kWide}, 9, -0.05, 0.05);
      for (const auto& [name, value] : {std::pair<const char*, const Buffer*>{"x", &x}, {"gain", &gain}, {"router", &router}}) {
        ref.set_input(name, *value);
        cuda.set_input(name, *value);
      }
      ref.run();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        const Buffer want_c = ref.output("chosen"), got_c = cuda.output("chosen");
        const Buffer want_w = ref.output("weights"), got_w = cuda.output("weights");
        ASSERT_EQ(got_c.numel(), want_c.numel());
        for (size_t i = 0; i < want_c.numel(); ++i) {
          ASSERT_EQ(got_c.get(i), want_c.get(i)) << "chosen[" << i << "] s=" << s << " run " << rep + 1 << (on ? "" : " (groups off)");
          ASSERT_NEAR(got_w.get(i), want_w.get(i), 1e-5) << "weights[" << i << "] s=" << s << " run " << rep + 1 << (on ? "" : " (groups off)");
        }
      }
      if (round < 2) {
        EXPECT_EQ(cuda.small_groups_run() > before, on && s == 1) << "s=" << s;
      }
    }
  }
}

}  // namespace
}  // namespace luminal::cuda
