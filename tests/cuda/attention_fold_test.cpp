// A decode attention that computes its q norms and its new keys' and values' rows (the fold of
// cuda_attention_fold.h, CudaOptions::attention_norms): which attentions the proof accepts, the
// twin's code, and decode steps of fixture decoders with and without it.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_attention_fold.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "cuda/cuda_cases.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"

namespace luminal::cuda {
namespace {

using testing::bf16_decoder_plan;
using testing::fixture_config;


// qwen3-tiny's shape with heads of 128 values, a real model's.
ModelConfig wide_heads() {
  ModelConfig c = fixture_config("qwen3-tiny");
  c.head_dim = 128;
  for (LayerConfig& l : c.layer) l.head_dim = 128;
  return c;
}

// Every attention of a decoder with q and k norms folds (its four nodes are the norms and the
// cache writes it reads); Llama's, with no norms there, does not. The twin takes the norms'
// inputs and the value update after its own, and the caches after the scratch and counters.
TEST(CudaCodegen, DecodeAttentionsComputeTheirNormsAndNewRows) {
  for (const auto& [name, config, folds] :
       {std::tuple<std::string, ModelConfig, bool>{"qwen3-tiny", fixture_config("qwen3-tiny"), true}, {"qwen3-moe-tiny", fixture_config("qwen3-moe-tiny"), true},
        {"128-value heads", wide_heads(), true}, {"llama-tiny", fixture_config("llama-tiny"), false}}) {
    const Graph plan = bf16_decoder_plan(config);
    PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.attention_norms = true});
    int attentions = 0, folded = 0;
    for (NodeId id = 0; id < plan.size(); ++id) {
      const Node& n = plan.node(id);
      if (n.op != OpKind::Kernel || n.kernel != "Attention") continue;
      ++attentions;
      const std::optional<AttentionNorms> f = attention_norms(plan, id);
      EXPECT_EQ(f.has_value(), k.per_node[id]->once_folded.has_value()) << name;
      if (!f) continue;
      ++folded;
      EXPECT_EQ(plan.node(f->q_norm).kernel, "RMSNormRotary");
      EXPECT_EQ(plan.node(f->k_norm).kernel, "RMSNormRotary");
      EXPECT_EQ(n.inputs[0].src, f->q_norm);
      EXPECT_EQ(n.inputs[1].src, f->k_write);
      EXPECT_EQ(n.inputs[2].src, f->v_write);
      const std::string* text = k.functions.find(k.per_node[id]->once_folded->function);
      ASSERT_NE(text, nullptr);
      EXPECT_NE(text->find("const char* __restrict__ lm_in3, const char* __restrict__ lm_qx"), std::string::npos) << name;
      EXPECT_NE(text->find("const char* __restrict__ lm_vu, char* __restrict__ lm_out1, char* __restrict__ lm_out2, char* __restrict__ "
                           "lm_out3, char* __restrict__ lm_out4, const long long"),
                std::string::npos)
          << name;
      EXPECT_NE(text->find("lm_new0 = lm_keys - lm_S"), std::string::npos) << name;
    }
    EXPECT_EQ(folded, folds ? config.layers : 0) << name;
    EXPECT_EQ(attentions, config.layers) << name;
    const PlanKernels off = generate_plan_kernels(plan, CodegenOptions{});
    for (const auto& n : off.per_node) EXPECT_FALSE(n && n->once_folded) << name;
    if (folds && nvrtc_unavailable_reason().empty()) {
      k.drop_alternatives();
      EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", "")) << name;
    }
  }
}

// The proof fails where a cache write's index puts the new rows anywhere else: the same decoder
// with the position of the key write one further on.
TEST(CudaCodegen, AttentionsWhoseCacheWritesGoElsewhereDoNotFold) {
  const Graph plan = bf16_decoder_plan(fixture_config("qwen3-tiny"));
  Graph moved;
  std::vector<NodeId> to(plan.size());
  int changed = 0;
  for (NodeId id = 0; id < plan.size(); ++id) {  // (a plan's ids are in topological order)
    const Node& n = plan.node(id);
    std::vector<Edge> in = n.inputs;
    for (Edge& e : in) e.src = to[e.src];
    if (n.op == OpKind::Iota && n.iota_expr.to_string().find("past") != std::string::npos && n.dtype == DType::I32) {
      to[id] = moved.iota(n.iota_expr + Expr(1), n.shape[0]);
      ++changed;
    } else {
      to[id] = moved.add_like(n, in);
    }
  }
  ASSERT_GT(changed, 0);
  int attentions = 0;
  for (NodeId id = 0; id < plan.size(); ++id)
    if (plan.node(id).op == OpKind::Kernel && plan.node(id).kernel == "Attention") {
      ++attentions;
      EXPECT_TRUE(attention_norms(plan, id).has_value());
      EXPECT_FALSE(attention_norms(moved, to[id]).has_value());
    }
  EXPECT_GT(attentions, 0);
}

// Decode steps (after a prefill, twice over, launched, recorded and replayed) with the fold give
// the logits the same executor gives without it, within rounding (the q and k norms sum their
// squares in another order), and the caches it writes serve the later steps.
TEST(CudaBackend, AttentionsComputingTheirNormsMatchTheUnfoldedSteps) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (const auto& [name, config] : {std::pair<std::string, ModelConfig>{"qwen3-tiny", fixture_config("qwen3-tiny")}, {"128-value heads", wide_heads()},
                                     {"qwen3-moe-tiny", fixture_config("qwen3-moe-tiny")}}) {
    const Graph plan = bf16_decoder_plan(config);
    const int64_t vocab = config.vocab;
    std::map<std::string, Buffer> weights;
    uint32_t seed = 500;
    for (NodeId id = 0; id < plan.size(); ++id) {
      const Node& n = plan.node(id);
      if (n.op != OpKind::Input || n.name == "tokens") continue;
      std::vector<int64_t> shape;
      for (const Expr& e : n.shape) shape.push_back(e.value());
      weights[n.name] = n.name.rfind("cache", 0) == 0 ? Buffer(n.dtype, shape) : testing::random_buffer(n.dtype, shape, seed++, -0.5f, 0.5f);
    }
    CudaExecutor folded(plan, "", CudaOptions{.tune_variants = false, .attention_norms = true}),
        plain(plan, "", CudaOptions{.tune_variants = false, .attention_norms = false});
    for (CudaExecutor* cuda : {&folded, &plain})
      for (const auto& [n, b] : weights) cuda->set_input(n, b);
    int64_t past = 0;
    for (int64_t seq : {5, 1, 1, 1, 1, 0, 3, 1, 1, 1}) {
      if (seq == 0) {
        past = 0;
        continue;
      }
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < seq; ++i) ids.push_back(static_cast<int32_t>((past * 7 + i * 13 + 1) % vocab));
      const int64_t before = folded.attention_norms_folded(), replays = folded.graph_stats().replayed;
      std::vector<Buffer> logits;
      for (CudaExecutor* cuda : {&folded, &plain}) {
        cuda->set_input("tokens", Buffer::i32(ids, {seq}));
        cuda->set_dim("seq", seq);
        cuda->set_dim("past", past);
        cuda->run();
        logits.push_back(cuda->output("logits"));
      }
      ASSERT_EQ(logits[0].numel(), logits[1].numel());
      for (size_t i = 0; i < logits[0].numel(); ++i)
        ASSERT_NEAR(logits[0].get(i), logits[1].get(i), 1e-4 * (1 + std::abs(logits[1].get(i))))
            << name << " past " << past << " seq " << seq << " logit " << i;
      // A launched decode step folds every layer's attention; a prefill none (a replay counts nothing).
      if (folded.graph_stats().replayed == replays) {
        EXPECT_EQ(folded.attention_norms_folded() - before, seq == 1 ? config.layers : 0) << name;
      }
      past += seq;
    }
    EXPECT_GT(folded.attention_norms_folded(), 0) << name;
    EXPECT_EQ(plain.attention_norms_folded(), 0) << name;
  }
}

}  // namespace
}  // namespace luminal::cuda
