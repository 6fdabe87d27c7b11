// The compiled plan of a whole decoder: every linear layer, in every layer, becomes a Matmul
// kernel, and every layer's attention an Attention kernel. Extraction once lost them past the first dozen layers of a Gemma 3 graph: tree costs
// that count a shared input once per path grow exponentially through the residual stream and
// drowned the kernels' own costs (docs/lessons.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compiler/compile.h"
#include "models/decoder_graph.h"
#include "egraph/plan_check.h"
#include "models/fixture.h"
#include "models/model_config.h"

namespace luminal {
namespace {

int count(const Graph& plan, const std::string& kernel) { return plancheck::count_kernels(plan, kernel); }

TEST(DecoderPlan, DeepGemma3GraphKeepsEveryMatmul) {
  // Gemma 3 270M's shape: 18 layers, hidden 640, one kv head of 256, MLP 2048.
  nlohmann::json c = {{"model_type", "gemma3_text"}, {"vocab_size", 512},        {"hidden_size", 640},
                      {"intermediate_size", 2048},   {"num_hidden_layers", 18},  {"num_attention_heads", 4},
                      {"num_key_value_heads", 1},    {"head_dim", 256},          {"sliding_window", 8},
                      {"max_position_embeddings", 256}};
  ModelConfig config = ModelConfig::from_json_text(c.dump(), "test config");
  Graph g;
  DecoderGraphOptions o;
  o.context = 64;
  build_decoder(g, config, o);
  CompileOptions co;
  co.dedup = false;
  CompileResult r = compile(g, co);
  // 7 linears per layer, plus the head; each layer's attention (its two products, scale, mask and
  // softmax) is one Attention kernel (chosen on the plan's DAG cost, egraph/dag_improve.h).
  EXPECT_EQ(count(r.plan, "Matmul"), 18 * 7 + 1) << "FusedSum kernels: " << count(r.plan, "FusedSum");
  EXPECT_EQ(count(r.plan, "Attention"), 18);
}

}  // namespace
}  // namespace luminal
