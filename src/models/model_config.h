#pragma once
// What a decoder-only LLM looks like, read from a Hugging Face config.json the way transformers
// reads it (defaults included), or from GGUF metadata. The graph builder needs nothing else.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace luminal {

// Rotary embedding of one layer type; inv_freq() gives the per-pair frequencies exactly as
// transformers' ROPE_INIT_FUNCTIONS compute them.
struct RopeConfig {
  std::string type = "default";  // default | linear | llama3 | proportional
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  double partial_rotary_factor = 1.0;
  std::vector<float> freq_factors;  // GGUF rope_freqs: each frequency divided by its factor
  // head_dim/2 frequencies (pairs past the rotary fraction are 0: no rotation).
  std::vector<float> inv_freq(int64_t head_dim) const;
};

enum class MlpKind { Dense, Moe, DenseAndMoe /* Gemma 4: both, summed */ };

struct LayerConfig {
  bool sliding = false;  // sliding-window attention (window = ModelConfig::sliding_window)
  int64_t head_dim = 0;
  int64_t kv_heads = 0;
  std::string rope_key;  // which of ModelConfig::ropes this layer uses
  bool k_eq_v = false;   // Gemma 4 full layers: values are the keys' projection
  MlpKind mlp = MlpKind::Dense;
  int64_t kv_shared_from = -1;  // Gemma 4: reuse this earlier layer's KV cache (-1: own cache)
};

struct ModelConfig {
  std::string model_type;  // llama | qwen3 | gemma3_text | qwen3_moe | mixtral | gemma4_text
  std::string source;      // the file it came from, for error messages
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t max_position = 0;
  double rms_eps = 1e-6;
  std::string activation = "silu";  // silu | gelu_pytorch_tanh | gelu
  bool tie_embeddings = false;
  bool attention_bias = false;

  // Family traits (set from model_type).
  bool qk_norm = false;         // RMSNorm over each head of q and k (Qwen3, Gemma 3/4)
  bool v_norm = false;          // RMSNorm without weight over each value head (Gemma 4)
  bool norm_plus_one = false;   // Gemma 3 norms scale by (1 + w)
  bool sandwich_norms = false;  // Gemma: post-attention and pre/post-feedforward norms
  bool embed_scale = false;     // Gemma: embeddings times sqrt(hidden)
  double attn_scale = 0;        // query scaling (0: 1/sqrt(head_dim))
  std::optional<double> attn_softcap, final_softcap;
  bool layer_scalar = false;    // Gemma 4: per-layer output scale tensor

  int64_t sliding_window = 0;
  std::vector<std::pair<std::string, RopeConfig>> ropes;  // by layer type ("default" when one)
  std::vector<LayerConfig> layer;

  // Mixture of experts.
  int64_t experts = 0, experts_per_token = 0, moe_intermediate = 0;
  bool norm_topk = true;
  bool router_gemma4 = false;  // Gemma 4 router: RMSNorm, scale, per-expert scale

  // Gemma 4 per-layer input embeddings (0: none).
  int64_t per_layer_input = 0, per_layer_vocab = 0;

  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;

  const RopeConfig& rope(const std::string& key) const;
  int64_t max_head_dim() const;

  static ModelConfig from_json_file(const std::string& path);
  static ModelConfig from_json_text(const std::string& text, const std::string& source);
};

// The model types from_json_* accepts, for error messages and --help.
const std::vector<std::string>& supported_model_types();

}  // namespace luminal
