// A ModelConfig from GGUF metadata, using the key names llama.cpp's converter writes
// ("<arch>.block_count", "<arch>.attention.head_count", ...).
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/dequant.h"
#include "loader/gguf.h"
#include "models/gguf_model.h"

namespace luminal {

namespace {
const std::map<std::string, std::string>& arch_to_model_type() {
  static const std::map<std::string, std::string> m = {
      {"llama", "llama"}, {"qwen3", "qwen3"}, {"gemma3", "gemma3_text"}, {"qwen3moe", "qwen3_moe"}};
  return m;
}
}  // namespace

ModelConfig config_from_gguf(const GgufFile& f) {
  std::string arch = f.get_string("general.architecture").value_or("");
  auto it = arch_to_model_type().find(arch);
  if (it == arch_to_model_type().end()) {
    std::string list;
    for (auto& [a, t] : arch_to_model_type()) list += (list.empty() ? "" : ", ") + a;
    throw Error("'" + f.path() + "': GGUF architecture '" + arch + "' is not supported (supported: " + list + ")");
  }
  std::string mt = it->second;
  auto integer = [&](const std::string& key, std::optional<int64_t> dflt = std::nullopt) {
    std::optional<int64_t> v = f.get_int(arch + "." + key);
    if (v) return *v;
    if (dflt) return *dflt;
    throw Error("'" + f.path() + "': GGUF metadata key '" + arch + "." + key + "' is missing");
  };
  auto number = [&](const std::string& key, double dflt) { return f.get_float(arch + "." + key).value_or(dflt); };

  // Assemble the equivalent config.json and let the one parser apply transformers' rules.
  nlohmann::json j;
  j["model_type"] = mt;
  j["hidden_size"] = integer("embedding_length");
  j["num_hidden_layers"] = integer("block_count");
  j["num_attention_heads"] = integer("attention.head_count");
  j["num_key_value_heads"] = integer("attention.head_count_kv", integer("attention.head_count"));
  j["intermediate_size"] = integer("feed_forward_length", 0);
  j["max_position_embeddings"] = integer("context_length", 4096);
  j["rms_norm_eps"] = number("attention.layer_norm_rms_epsilon", 1e-6);
  int64_t head_dim = integer("attention.key_length", integer("embedding_length") / integer("attention.head_count"));
  j["head_dim"] = head_dim;
  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw Error("'" + f.path() + "': tensor 'token_embd.weight' is missing");
  j["vocab_size"] = integer("vocab_size", embd->shape[0]);
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  j["rope_theta"] = number("rope.freq_base", mt == "gemma3_text" ? 1000000.0 : 10000.0);
  if (auto t = f.get_string(arch + ".rope.scaling.type"); t && *t == "linear")
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", number("rope.scaling.factor", 1.0)}};
  if (mt == "gemma3_text") {
    j["sliding_window"] = integer("attention.sliding_window", 512);
    j["query_pre_attn_scalar"] = head_dim;
  }
  if (mt == "qwen3_moe") {
    j["num_experts"] = integer("expert_count");
    j["num_experts_per_tok"] = integer("expert_used_count");
    j["moe_intermediate_size"] = integer("expert_feed_forward_length");
    j["norm_topk_prob"] = true;
  }
  if (auto eos = f.get_int("tokenizer.ggml.eos_token_id")) j["eos_token_id"] = *eos;
  if (auto bos = f.get_int("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  ModelConfig c = ModelConfig::from_json_text(j.dump(), f.path());
  // llama.cpp's converter stores Gemma norms as (1 + w) already.
  if (mt == "gemma3_text") c.norm_plus_one = false;
  // Llama 3.1+ GGUFs keep the llama3 rope scaling as per-frequency factors.
  if (const GgufTensor* rf = f.find_tensor("rope_freqs.weight")) {
    std::vector<float> factors = dequantize(*rf);
    for (auto& [key, rope] : c.ropes) rope.freq_factors = factors;
  }
  return c;
}

}  // namespace luminal
