#include "models/model_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace luminal {

using nlohmann::json;

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"llama", "qwen3", "gemma3_text", "qwen3_moe", "mixtral", "gemma4_text"};
  return types;
}

std::vector<float> RopeConfig::inv_freq(int64_t head_dim) const {
  const double pi = 3.14159265358979323846;
  int64_t pairs = head_dim / 2;
  std::vector<float> f(static_cast<size_t>(pairs), 0.0f);
  // transformers computes base ** (2i / dim) in f32; doing it in double and rounding once is
  // within an ulp of that.
  if (type == "proportional") {
    int64_t rotated = static_cast<int64_t>(partial_rotary_factor * static_cast<double>(head_dim) / 2.0);
    for (int64_t i = 0; i < rotated && i < pairs; ++i)
      f[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim)) / factor);
    return f;
  }
  int64_t dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    double inv = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    if (type == "linear") inv /= factor;
    if (type == "llama3") {
      double low_wavelen = static_cast<double>(original_max_position) / low_freq_factor;
      double high_wavelen = static_cast<double>(original_max_position) / high_freq_factor;
      double wavelen = 2 * pi / inv;
      if (wavelen > low_wavelen) {
        inv = inv / factor;
      } else if (wavelen >= high_wavelen) {  // medium frequencies: interpolate
        double smooth = (static_cast<double>(original_max_position) / wavelen - low_freq_factor) /
                        (high_freq_factor - low_freq_factor);
        inv = (1 - smooth) * inv / factor + smooth * inv;
      }
    }
    if (static_cast<size_t>(i) < freq_factors.size()) inv /= freq_factors[i];
    f[i] = static_cast<float>(inv);
  }
  return f;
}

const RopeConfig& ModelConfig::rope(const std::string& key) const {
  for (auto& [k, r] : ropes)
    if (k == key) return r;
  throw Error(source + ": no rope parameters for layer type '" + key + "'");
}

int64_t ModelConfig::max_head_dim() const {
  int64_t m = head_dim;
  for (const LayerConfig& l : layer) m = std::max(m, l.head_dim);
  return m;
}

namespace {

// Typed reads that say which field was wrong.
struct Fields {
  const json& j;
  const std::string& src;

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }
  int64_t integer(const char* k, std::optional<int64_t> dflt = std::nullopt) const {
    if (!has(k)) {
      if (dflt) return *dflt;
      throw Error(src + ": required field \"" + k + "\" is missing");
    }
    if (!j[k].is_number()) throw Error(src + ": field \"" + k + "\" must be a number");
    return j[k].get<int64_t>();
  }
  double number(const char* k, double dflt) const {
    if (!has(k)) return dflt;
    if (!j[k].is_number()) throw Error(src + ": field \"" + k + "\" must be a number");
    return j[k].get<double>();
  }
  bool boolean(const char* k, bool dflt) const {
    if (!has(k)) return dflt;
    if (!j[k].is_boolean()) throw Error(src + ": field \"" + k + "\" must be true or false");
    return j[k].get<bool>();
  }
  std::string string(const char* k, const std::string& dflt) const {
    if (!has(k)) return dflt;
    if (!j[k].is_string()) throw Error(src + ": field \"" + k + "\" must be a string");
    return j[k].get<std::string>();
  }
};

RopeConfig parse_rope(const json& p, double default_theta, int64_t default_original, const std::string& src) {
  RopeConfig r;
  r.theta = default_theta;
  r.original_max_position = default_original;
  if (p.is_null()) return r;
  if (!p.is_object()) throw Error(src + ": rope parameters must be an object");
  Fields f{p, src};
  r.type = f.string("rope_type", f.string("type", "default"));
  r.theta = f.number("rope_theta", default_theta);
  r.factor = f.number("factor", 1.0);
  r.low_freq_factor = f.number("low_freq_factor", 1.0);
  r.high_freq_factor = f.number("high_freq_factor", 4.0);
  r.original_max_position = f.integer("original_max_position_embeddings", default_original);
  r.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  static const std::vector<std::string> known = {"default", "linear", "llama3", "proportional"};
  if (std::find(known.begin(), known.end(), r.type) == known.end())
    throw Error(src + ": rope_type '" + r.type + "' is not supported (supported: default, linear, llama3, proportional)");
  return r;
}

std::vector<int32_t> token_ids(const json& v) {
  std::vector<int32_t> r;
  if (v.is_number_integer()) r.push_back(v.get<int32_t>());
  else if (v.is_array())
    for (const json& x : v)
      if (x.is_number_integer()) r.push_back(x.get<int32_t>());
  return r;
}

}  // namespace

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(source + " is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(source + " must hold a JSON object");
  // Multimodal configs keep the language model under text_config.
  if (j.contains("text_config") && j["text_config"].is_object() && !j.contains("num_hidden_layers")) {
    json t = j["text_config"];
    for (const char* k : {"eos_token_id", "bos_token_id", "tie_word_embeddings"})
      if (!t.contains(k) && j.contains(k)) t[k] = j[k];
    j = t;
  }
  Fields f{j, source};
  ModelConfig c;
  c.source = source;
  c.model_type = f.string("model_type", "");
  if (c.model_type == "gemma3") c.model_type = "gemma3_text";
  if (c.model_type == "gemma4") c.model_type = "gemma4_text";
  const auto& types = supported_model_types();
  if (std::find(types.begin(), types.end(), c.model_type) == types.end()) {
    std::string list;
    for (const auto& t : types) list += (list.empty() ? "" : ", ") + t;
    throw Error(source + ": model_type '" + c.model_type + "' is not supported (supported: " + list + ")");
  }
  const std::string& mt = c.model_type;
  bool gemma3 = mt == "gemma3_text", gemma4 = mt == "gemma4_text", gemma = gemma3 || gemma4;

  c.vocab = f.integer("vocab_size", gemma ? 262144 : 32000);
  c.hidden = f.integer("hidden_size");
  c.intermediate = f.integer("intermediate_size", 0);
  c.layers = f.integer("num_hidden_layers");
  c.heads = f.integer("num_attention_heads");
  c.kv_heads = f.integer("num_key_value_heads", c.heads);
  int64_t default_head_dim = mt == "qwen3" || mt == "qwen3_moe" ? 128 : gemma ? 256 : c.hidden / c.heads;
  c.head_dim = f.integer("head_dim", default_head_dim);
  if (c.heads <= 0 || c.kv_heads <= 0 || c.heads % c.kv_heads != 0)
    throw Error(source + ": num_attention_heads (" + std::to_string(c.heads) +
                ") must be a positive multiple of num_key_value_heads (" + std::to_string(c.kv_heads) + ")");
  c.max_position = f.integer("max_position_embeddings", gemma ? 131072 : 2048);
  c.rms_eps = f.number("rms_norm_eps", mt == "llama" ? 1e-6 : mt == "mixtral" ? 1e-5 : 1e-6);
  c.activation = f.string("hidden_activation", f.string("hidden_act", gemma ? "gelu_pytorch_tanh" : "silu"));
  if (c.activation != "silu" && c.activation != "gelu_pytorch_tanh" && c.activation != "gelu" && c.activation != "gelu_new")
    throw Error(source + ": activation '" + c.activation + "' is not supported (silu, gelu, gelu_pytorch_tanh)");
  c.tie_embeddings = f.boolean("tie_word_embeddings", gemma);
  c.attention_bias = f.boolean("attention_bias", false);
  if (j.contains("eos_token_id")) c.eos_ids = token_ids(j["eos_token_id"]);
  if (f.has("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int32_t>();

  c.qk_norm = mt == "qwen3" || mt == "qwen3_moe" || gemma;
  c.v_norm = gemma4;
  c.norm_plus_one = gemma3;
  c.sandwich_norms = gemma;
  c.embed_scale = gemma;
  c.layer_scalar = gemma4;
  if (gemma3) c.attn_scale = 1.0 / std::sqrt(static_cast<double>(f.integer("query_pre_attn_scalar", 256)));
  if (gemma4) c.attn_scale = 1.0;
  if (f.has("attn_logit_softcapping")) c.attn_softcap = f.number("attn_logit_softcapping", 0);
  if (f.has("final_logit_softcapping")) c.final_softcap = f.number("final_logit_softcapping", 0);

  // Layer types: explicit, or the family's default pattern.
  std::vector<std::string> layer_types;
  if (f.has("layer_types")) layer_types = j["layer_types"].get<std::vector<std::string>>();
  if (layer_types.empty()) {
    int64_t pattern = gemma ? f.integer("sliding_window_pattern", f.integer("_sliding_window_pattern", 6)) : 0;
    bool sliding_all = (mt == "mixtral" && f.has("sliding_window")) ||
                       ((mt == "qwen3" || mt == "qwen3_moe") && f.boolean("use_sliding_window", false));
    for (int64_t l = 0; l < c.layers; ++l) {
      bool sliding = pattern > 0 ? ((l + 1) % pattern != 0) : sliding_all;
      layer_types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
    if (gemma4 && !layer_types.empty()) layer_types.back() = "full_attention";
  }
  if (static_cast<int64_t>(layer_types.size()) != c.layers)
    throw Error(source + ": layer_types has " + std::to_string(layer_types.size()) + " entries for " +
                std::to_string(c.layers) + " layers");
  c.sliding_window = f.has("sliding_window") ? f.integer("sliding_window") : 0;

  // Rotary parameters: transformers 5 `rope_parameters` (flat, or per layer type), or the
  // older `rope_theta` + `rope_scaling` (+ Gemma 3's `rope_local_base_freq`).
  double theta = f.number("rope_theta", gemma ? 1000000.0 : mt == "mixtral" ? 1000000.0 : 10000.0);
  int64_t orig = c.max_position;
  json rp = f.has("rope_parameters") ? j["rope_parameters"] : json();
  bool per_type = rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"));
  if (per_type) {
    for (auto& [k, v] : rp.items()) c.ropes.push_back({k, parse_rope(v, theta, orig, source)});
  } else if (rp.is_object()) {
    c.ropes.push_back({"default", parse_rope(rp, theta, orig, source)});
  } else {
    json scaling = f.has("rope_scaling") ? j["rope_scaling"] : json();
    RopeConfig global = parse_rope(scaling, theta, orig, source);
    if (gemma) {
      RopeConfig local;
      local.theta = f.number("rope_local_base_freq", 10000.0);
      c.ropes.push_back({"full_attention", global});
      c.ropes.push_back({"sliding_attention", local});
    } else {
      c.ropes.push_back({"default", global});
    }
  }

  // Mixture of experts.
  c.experts = f.integer("num_experts", f.integer("num_local_experts", 0));
  c.experts_per_token = f.integer("num_experts_per_tok", f.integer("top_k_experts", 0));
  c.moe_intermediate = f.integer("moe_intermediate_size", c.intermediate);
  c.norm_topk = mt == "mixtral" || gemma4 ? true : f.boolean("norm_topk_prob", false);
  c.router_gemma4 = gemma4;
  bool gemma4_moe = gemma4 && f.boolean("enable_moe_block", false);
  if ((mt == "qwen3_moe" || mt == "mixtral" || gemma4_moe) && (c.experts <= 0 || c.experts_per_token <= 0))
    throw Error(source + ": a " + mt + " model needs num_experts and num_experts_per_tok");
  std::vector<int64_t> mlp_only;
  if (f.has("mlp_only_layers")) mlp_only = j["mlp_only_layers"].get<std::vector<int64_t>>();
  int64_t sparse_step = f.integer("decoder_sparse_step", 1);

  // Gemma 4 per-layer overrides and KV sharing.
  int64_t kv_shared = gemma4 ? f.integer("num_kv_shared_layers", 0) : 0;
  json per_layer = gemma4 && f.has("per_layer_config") ? j["per_layer_config"] : json();
  if (gemma4 && per_layer.is_null()) {  // transformers' default: global head dim on full layers
    per_layer = json::object();
    for (int64_t l = 0; l < c.layers; ++l)
      if (layer_types[l] == "full_attention") {
        per_layer[std::to_string(l)]["head_dim"] = f.integer("global_head_dim", 512);
        if (f.boolean("attention_k_eq_v", false) && f.has("num_global_key_value_heads"))
          per_layer[std::to_string(l)]["num_key_value_heads"] = f.integer("num_global_key_value_heads");
      }
  }
  if (gemma4) {
    c.per_layer_input = f.integer("hidden_size_per_layer_input", 0);
    c.per_layer_vocab = f.integer("vocab_size_per_layer_input", c.vocab);
  }
  bool k_eq_v = gemma4 && f.boolean("attention_k_eq_v", false);

  for (int64_t l = 0; l < c.layers; ++l) {
    LayerConfig L;
    L.sliding = layer_types[l] == "sliding_attention";
    if (layer_types[l] != "sliding_attention" && layer_types[l] != "full_attention")
      throw Error(source + ": layer type '" + layer_types[l] + "' is not supported (full_attention, sliding_attention)");
    L.head_dim = c.head_dim;
    L.kv_heads = c.kv_heads;
    if (per_layer.is_object() && per_layer.contains(std::to_string(l))) {
      const json& o = per_layer[std::to_string(l)];
      Fields lf{o, source};
      L.head_dim = lf.integer("head_dim", L.head_dim);
      L.kv_heads = lf.integer("num_key_value_heads", L.kv_heads);
    }
    L.rope_key = per_type || gemma ? layer_types[l] : "default";
    L.k_eq_v = k_eq_v && !L.sliding;
    bool moe_layer = (mt == "qwen3_moe" && std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() &&
                      (l + 1) % sparse_step == 0) ||
                     mt == "mixtral";
    L.mlp = gemma4_moe ? MlpKind::DenseAndMoe : moe_layer ? MlpKind::Moe : MlpKind::Dense;
    c.layer.push_back(L);
  }
  // Gemma 4: the last `num_kv_shared_layers` layers reuse the KV of the last earlier layer of
  // their type.
  if (kv_shared > 0) {
    int64_t first_shared = c.layers - kv_shared;
    for (int64_t l = first_shared; l < c.layers; ++l)
      for (int64_t p = first_shared - 1; p >= 0; --p)
        if (c.layer[p].sliding == c.layer[l].sliding) {
          c.layer[l].kv_shared_from = p;
          break;
        }
  }
  for (const LayerConfig& L : c.layer) c.rope(L.rope_key);  // every layer type has rope parameters
  return c;
}

ModelConfig ModelConfig::from_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path + "': a model folder needs a config.json (from Hugging Face)");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

}  // namespace luminal
