// GGUF tensors under Hugging Face names. llama.cpp renames every tensor, stacks experts, and for
// the llama architecture interleaves the rows of q_proj/k_proj per head (its rope pairs
// adjacent elements; Hugging Face pairs the two halves); loading undoes both.
#include <cstring>
#include <map>
#include <regex>

#include "core/error.h"
#include "loader/dequant.h"
#include "loader/gguf.h"
#include "models/gguf_model.h"

namespace luminal {
namespace {

struct GgufName {
  std::string name;
  bool unpermute_heads = false;  // q/k rows of a llama-architecture file
};

class GgufWeights : public WeightStore {
 public:
  GgufWeights(const std::string& path, const ModelConfig& c) : file_(GgufFile::open(path)), config_(c) {}

  bool has(const std::string& name) const override { return file_.find_tensor(gguf_name(name).name) != nullptr; }
  DType natural_dtype() const override { return DType::F32; }
  std::string where() const override { return file_.path(); }

  Buffer load(const std::string& name, const std::vector<int64_t>& shape) const override {
    const std::string fused = "mlp.experts.gate_up_proj";
    if (name.size() > fused.size() && name.compare(name.size() - fused.size(), fused.size(), fused) == 0)
      return load_gate_up(name.substr(0, name.size() - fused.size()), shape);
    GgufName g = gguf_name(name);
    const GgufTensor* t = file_.find_tensor(g.name);
    if (!t) throw Error("tensor '" + g.name + "' (for '" + name + "') is missing from '" + file_.path() + "'");
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (t->numel() != numel)
      throw Error("tensor '" + g.name + "' in '" + file_.path() + "' has shape " + shape_string(t->shape) +
                  " but the metadata implies " + shape_string(shape));
    std::vector<float> v = dequantize(*t);
    if (g.unpermute_heads) v = unpermute(v, shape);
    return Buffer::f32(v, shape);
  }

 private:
  // Row 2i+j of each head in the file is row j*(hd/2)+i in Hugging Face's layout.
  std::vector<float> unpermute(const std::vector<float>& v, const std::vector<int64_t>& shape) const {
    int64_t rows = shape[0], cols = shape[1], hd = config_.head_dim, half = hd / 2;
    std::vector<float> r(v.size());
    for (int64_t h = 0; h < rows / hd; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(&r[static_cast<size_t>((h * hd + j * half + i) * cols)], &v[static_cast<size_t>((h * hd + 2 * i + j) * cols)],
                      sizeof(float) * static_cast<size_t>(cols));
    return r;
  }

  // llama.cpp keeps the experts' gate and up projections apart; Hugging Face fuses them per
  // expert as [E, 2I, H] (gate rows first).
  Buffer load_gate_up(const std::string& prefix, const std::vector<int64_t>& shape) const {
    std::string blk = gguf_name(prefix + "mlp.experts.down_proj").name;
    blk = blk.substr(0, blk.find("ffn_down_exps"));
    const GgufTensor* gate = file_.find_tensor(blk + "ffn_gate_exps.weight");
    const GgufTensor* up = file_.find_tensor(blk + "ffn_up_exps.weight");
    if (!gate || !up) throw Error("tensors '" + blk + "ffn_gate_exps.weight' / 'ffn_up_exps.weight' are missing from '" + file_.path() + "'");
    int64_t E = shape[0], I = shape[1] / 2, H = shape[2];
    if (gate->numel() != E * I * H || up->numel() != E * I * H)
      throw Error("'" + blk + "ffn_gate_exps.weight' has shape " + shape_string(gate->shape) + "; expected " + std::to_string(E * I * H) + " elements");
    std::vector<float> g = dequantize(*gate), u = dequantize(*up), r(static_cast<size_t>(E * 2 * I * H));
    size_t block = static_cast<size_t>(I * H);
    for (int64_t e = 0; e < E; ++e) {
      std::memcpy(&r[2 * e * block], &g[e * block], block * sizeof(float));
      std::memcpy(&r[(2 * e + 1) * block], &u[e * block], block * sizeof(float));
    }
    return Buffer::f32(r, shape);
  }

  GgufName gguf_name(const std::string& hf) const {
    static const std::map<std::string, std::string> top = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                           {"model.norm.weight", "output_norm.weight"},
                                                           {"lm_head.weight", "output.weight"}};
    if (auto it = top.find(hf); it != top.end()) return {it->second};
    static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
    std::smatch m;
    if (!std::regex_match(hf, m, layer)) return {hf};
    static const std::map<std::string, std::string> per_layer = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.experts.down_proj", "ffn_down_exps.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    std::string rest = m[2];
    std::string blk = "blk." + std::string(m[1]) + ".";
    bool gemma = config_.sandwich_norms;
    if (rest == "post_attention_layernorm.weight") return {blk + (gemma ? "post_attention_norm.weight" : "ffn_norm.weight")};
    auto it = per_layer.find(rest);
    if (it == per_layer.end()) return {blk + rest};
    bool permuted = config_.model_type == "llama" && (rest == "self_attn.q_proj.weight" || rest == "self_attn.k_proj.weight");
    return {blk + it->second, permuted};
  }

  GgufFile file_;
  ModelConfig config_;
};

}  // namespace

std::unique_ptr<WeightStore> open_gguf_weights(const std::string& path, const ModelConfig& c) {
  return std::make_unique<GgufWeights>(path, c);
}

}  // namespace luminal
