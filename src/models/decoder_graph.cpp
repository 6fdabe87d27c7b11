#include "models/decoder_graph.h"

#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "frontend/ops.h"

namespace luminal {

std::string cache_input_name(int64_t layer, char kv) { return "cache." + std::to_string(layer) + "." + kv; }

std::string rope_input_name(const std::string& rope_key, int64_t head_dim) {
  return "rope." + rope_key + "." + std::to_string(head_dim);
}

namespace {

class DecoderBuilder {
 public:
  DecoderBuilder(Graph& g, const ModelConfig& c, const DecoderGraphOptions& o)
      : g_(g), c_(c), o_(o), seq_(Expr::var("seq")), past_(Expr::var("past")), total_(past_ + seq_) {}

  void build() {
    if (o_.context <= 0) throw Error("build_decoder: the context length must be positive");
    if (o_.kv_dtype != DType::F32 && o_.kv_dtype != DType::BF16)
      throw Error(std::string("build_decoder: the KV cache holds f32 or bf16, not ") + dtype_name(o_.kv_dtype));
    Tensor tokens = input(g_, "tokens", DType::I32, {seq_});
    Tensor embed = weight("model.embed_tokens.weight", {c_.vocab, c_.hidden});
    Tensor h = cast(embedding(embed, tokens), DType::F32);  // [seq, hidden]
    if (c_.embed_scale) h = h * std::sqrt(static_cast<double>(c_.hidden));
    std::optional<Tensor> per_layer_inputs;
    if (c_.per_layer_input > 0) per_layer_inputs = build_per_layer_inputs(tokens, h);
    positions_ = cast(iota(g_, past_ + Expr::index(), seq_), DType::F32);

    // What layers share (masks, rope tables) is built before the first layer, so every layer's
    // nodes come out in the same order and layer dedup cuts blocks at layer boundaries (a block
    // that started mid-attention would hide the attention pattern from the rules).
    for (const LayerConfig& L : c_.layer) {
      mask(L.sliding);
      rope_tables(L.rope_key, L.head_dim);
    }
    for (int64_t l = 0; l < c_.layers; ++l) h = layer(h, l, per_layer_inputs);

    if (!o_.all_logits) h = slice(h, 0, seq_ - 1, seq_);
    h = norm(h, "model.norm.weight", c_.hidden);
    Tensor head = c_.tie_embeddings ? embed : weight("lm_head.weight", {c_.vocab, c_.hidden});
    Tensor logits = linear(h, f32(head), std::nullopt);
    if (c_.final_softcap) logits = tanh(logits * (1.0 / *c_.final_softcap)) * *c_.final_softcap;
    logits.output("logits");
  }

 private:
  Tensor weight(const std::string& name, const Shape& shape) {
    auto it = weights_.find(name);
    if (it != weights_.end()) return it->second;
    Tensor t = input(g_, name, o_.weight_dtype, shape);
    weights_.emplace(name, t);
    return t;
  }
  static Tensor f32(const Tensor& t) { return t.dtype() == DType::F32 ? t : cast(t, DType::F32); }

  // RMSNorm over the last dim with the family's weight convention.
  Tensor norm(const Tensor& x, const std::string& name, int64_t dim) {
    Tensor w = f32(weight(name, {dim}));
    return rms_norm(x, c_.norm_plus_one ? w + 1.0 : w, c_.rms_eps);
  }

  Tensor proj(const Tensor& x, const std::string& name, int64_t out, int64_t in, bool bias = false) {
    Tensor w = f32(weight(name + ".weight", {out, in}));
    std::optional<Tensor> b;
    if (bias) b = f32(weight(name + ".bias", {out}));
    return linear(x, w, b);
  }

  Tensor act(const Tensor& x) const {
    if (c_.activation == "silu") return silu(x);
    if (c_.activation == "gelu") return gelu(x);
    return gelu_tanh(x);  // gelu_pytorch_tanh, gelu_new
  }

  // cos and sin tables [seq, 1, head_dim] for one rope type and head size (rotate-half layout).
  std::pair<Tensor, Tensor> rope_tables(const std::string& key, int64_t head_dim) {
    std::string name = rope_input_name(key, head_dim);
    auto it = rope_.find(name);
    if (it != rope_.end()) return it->second;
    Tensor inv = input(g_, name, DType::F32, {head_dim / 2});
    Tensor angles = unsqueeze(positions_, 1) * unsqueeze(inv, 0);  // [seq, head_dim/2], f32 as in HF
    Tensor full = unsqueeze(concat({angles, angles}, 1), 1);
    auto r = rope_.emplace(name, std::make_pair(cos(full), sin(full))).first->second;
    return r;
  }

  static Tensor rotate(const Tensor& x, const std::pair<Tensor, Tensor>& cs) {
    Expr d = x.dim(-1), half = d / 2;
    Tensor rotated = concat({neg(slice(x, -1, half, d)), slice(x, -1, 0, half)}, -1);
    return x * cs.first + rotated * cs.second;
  }

  // Query i (absolute position past+i) sees key j when j <= past+i, and within the window on
  // sliding layers: j > past+i-window.
  Tensor mask(bool sliding) {
    auto it = masks_.find(sliding);
    if (it != masks_.end()) return it->second;
    Expr z = Expr::index();
    Expr i = z / total_, j = z % total_;
    Expr visible = lt(j, i + past_ + 1);
    if (sliding && c_.sliding_window > 0) visible = visible * lt(i + past_ - c_.sliding_window, j);
    Tensor m = reshape(cast(iota(g_, visible, seq_ * total_), DType::Bool), {seq_, total_});
    return masks_.emplace(sliding, m).first->second;
  }

  Tensor attention(const Tensor& x, int64_t l) {
    const LayerConfig& L = c_.layer[l];
    std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    int64_t hd = L.head_dim, heads = c_.heads;
    Tensor q = reshape(proj(x, p + "q_proj", heads * hd, c_.hidden, c_.attention_bias), {seq_, heads, hd});
    if (c_.qk_norm) q = norm(q, p + "q_norm.weight", hd);
    auto cs = rope_tables(L.rope_key, hd);
    q = permute(rotate(q, cs), {1, 0, 2});  // [heads, seq, hd]

    int64_t cache_layer = L.kv_shared_from >= 0 ? L.kv_shared_from : l;
    int64_t kvh = L.kv_heads;
    if (L.kv_shared_from < 0) {
      Tensor k_raw = reshape(proj(x, p + "k_proj", kvh * hd, c_.hidden, c_.attention_bias), {seq_, kvh, hd});
      Tensor v = L.k_eq_v ? k_raw : reshape(proj(x, p + "v_proj", kvh * hd, c_.hidden, c_.attention_bias), {seq_, kvh, hd});
      Tensor k = c_.qk_norm ? norm(k_raw, p + "k_norm.weight", hd) : k_raw;
      if (c_.v_norm) v = rms_norm(v, std::nullopt, c_.rms_eps);
      k = permute(rotate(k, cs), {1, 0, 2});
      v = permute(v, {1, 0, 2});
      // Write this step's keys and values into the caches at positions past .. past+seq-1.
      Tensor pos = broadcast_to(reshape(iota(g_, past_ + Expr::index(), seq_), {1, seq_, 1}), {kvh, seq_, hd});
      // A bf16 cache stores the rounded values and is read widened (the matmuls take the bf16
      // cache directly: the Cast folds into them).
      const DType kv = o_.kv_dtype;
      Tensor kc = input(g_, cache_input_name(l, 'k'), kv, {kvh, o_.context, hd});
      Tensor vc = input(g_, cache_input_name(l, 'v'), kv, {kvh, o_.context, hd});
      auto stored = [&](const Tensor& t) { return kv == DType::F32 ? t : cast(t, kv); };
      auto read = [&](const Tensor& t) { return kv == DType::F32 ? t : f32(t); };
      keys_[l] = slice(read(scatter(kc, 1, pos, stored(k))), 1, 0, total_);
      values_[l] = slice(read(scatter(vc, 1, pos, stored(v))), 1, 0, total_);
    }
    Tensor k_all = keys_.at(cache_layer), v_all = values_.at(cache_layer);  // [kvh, total, hd]
    kvh = c_.layer[cache_layer].kv_heads;
    int64_t group = heads / kvh;
    // Grouped-query attention without repeating keys: the `group` query heads of one kv head
    // are stacked along the query axis, [kvh, group*seq, hd] (a reshape of contiguous q).
    Tensor qg = reshape(q, {kvh, group * seq_, hd});
    double scale = c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    Tensor scores = matmul(qg, transpose(k_all, 1, 2));  // [kvh, group*seq, total]
    if (scale != 1.0) scores = scores * scale;
    if (c_.attn_softcap) scores = tanh(scores * (1.0 / *c_.attn_softcap)) * *c_.attn_softcap;
    scores = where(mask(L.sliding), reshape(scores, {kvh, group, seq_, total_}), -std::numeric_limits<double>::infinity());
    Tensor probs = reshape(softmax(scores, -1), {kvh, group * seq_, total_});
    Tensor out = reshape(matmul(probs, v_all), {heads, seq_, hd});
    Tensor merged = reshape(permute(out, {1, 0, 2}), {seq_, heads * hd});
    return proj(merged, p + "o_proj", c_.hidden, heads * hd, false);
  }

  Tensor dense_mlp(const Tensor& x, const std::string& p) {
    Tensor gate = act(proj(x, p + "gate_proj", c_.intermediate, c_.hidden));
    Tensor up = proj(x, p + "up_proj", c_.intermediate, c_.hidden);
    return proj(gate * up, p + "down_proj", c_.hidden, c_.intermediate);
  }

  // Top-k routing as dense [seq, E] tensors: each expert's weight (zero for experts not chosen)
  // and which experts are chosen (1 or 0; a chosen expert's weight may still round to zero).
  struct Routing {
    Tensor weights, chosen;
  };
  Routing route(const Tensor& x, const std::string& p) {
    int64_t E = c_.experts, K = c_.experts_per_token;
    Tensor r = x;
    if (c_.router_gemma4) {
      r = rms_norm(x, std::nullopt, c_.rms_eps) * f32(weight(p + "router.scale", {c_.hidden})) *
          (1.0 / std::sqrt(static_cast<double>(c_.hidden)));
    }
    std::string gate_name = c_.router_gemma4 ? p + "router.proj" : p + "mlp.gate";
    Tensor probs = softmax(proj(r, gate_name, E, c_.hidden), -1);  // [seq, E]
    // The top k as a mask, without sorting or scattering (a few fused kernels, not a dozen): an
    // expert is chosen when fewer than k experts come before it, larger or equal at a lower
    // index (topk's order).
    Tensor mine = unsqueeze(probs, 2), other = unsqueeze(probs, 1);  // [seq, E, 1], [seq, 1, E]
    Tensor lower = lt(unsqueeze(arange(g_, 0, E), 0), unsqueeze(arange(g_, 0, E), 1));  // [e, e']: e' < e
    Tensor before = logical_or(gt(other, mine), logical_and(eq(other, mine), lower));
    Tensor chosen = cast(lt(sum(cast(before, DType::F32), {2}), full(g_, {1}, static_cast<double>(K))), DType::F32);
    Tensor w = probs * chosen;
    if (c_.norm_topk) w = w / sum(w, {-1}, true);
    if (c_.router_gemma4) w = w * f32(weight(p + "router.per_expert_scale", {E}));
    return {w, chosen};
  }

  // Every expert on every token, its inputs scaled by the routing: gate/up's by whether the
  // expert is chosen, down's by its weight; then the sum over experts. The scales are per row of
  // each expert's matmul, so the compiler turns them into ScaledMatmul kernels that skip the rows
  // (and the weights) of experts a token did not choose: a decode step reads only its k experts.
  Tensor experts(const Tensor& x, const Routing& routing, const std::string& p) {
    int64_t E = c_.experts, I = c_.moe_intermediate, H = c_.hidden;
    Tensor gate_up = f32(weight(p + "experts.gate_up_proj", {E, 2 * I, H}));
    Tensor down = f32(weight(p + "experts.down_proj", {E, H, I}));
    auto per_expert = [&](const Tensor& r) { return unsqueeze(permute(r, {1, 0}), 2); };  // [E, seq, 1]
    Tensor xs = expand(unsqueeze(x, 0), {E, seq_, H}) * per_expert(routing.chosen);
    Tensor gu = matmul(xs, transpose(gate_up, 1, 2));  // [E, seq, 2I]
    Tensor a = act(slice(gu, -1, 0, I)) * slice(gu, -1, I, 2 * I);
    Tensor d = matmul(a * per_expert(routing.weights), transpose(down, 1, 2));  // [E, seq, H]
    return sum(d, {0});
  }

  Tensor layer(Tensor h, int64_t l, const std::optional<Tensor>& per_layer_inputs) {
    const LayerConfig& L = c_.layer[l];
    std::string p = "model.layers." + std::to_string(l) + ".";
    Tensor a = attention(norm(h, p + "input_layernorm.weight", c_.hidden), l);
    if (c_.sandwich_norms) a = norm(a, p + "post_attention_layernorm.weight", c_.hidden);
    h = h + a;

    Tensor residual = h;
    Tensor x = norm(h, p + (c_.sandwich_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"), c_.hidden);
    Tensor m = x;
    if (L.mlp == MlpKind::Dense) {
      m = dense_mlp(x, p + "mlp.");
    } else if (L.mlp == MlpKind::Moe) {
      m = experts(x, route(x, p), p + "mlp.");
    } else {  // Gemma 4: a dense MLP and the experts side by side, each with its own norms
      Tensor m1 = norm(dense_mlp(x, p + "mlp."), p + "post_feedforward_layernorm_1.weight", c_.hidden);
      Tensor x2 = norm(residual, p + "pre_feedforward_layernorm_2.weight", c_.hidden);
      Tensor m2 = experts(x2, route(residual, p), p);
      m = m1 + norm(m2, p + "post_feedforward_layernorm_2.weight", c_.hidden);
    }
    if (c_.sandwich_norms) m = norm(m, p + "post_feedforward_layernorm.weight", c_.hidden);
    h = residual + m;

    if (per_layer_inputs) {
      int64_t D = c_.per_layer_input;
      Tensor gate = act(proj(h, p + "per_layer_input_gate", D, c_.hidden));
      Tensor mixed = gate * select(*per_layer_inputs, 1, l);  // [seq, D]
      h = h + norm(proj(mixed, p + "per_layer_projection", c_.hidden, D), p + "post_per_layer_input_norm.weight", c_.hidden);
    }
    if (c_.layer_scalar) h = h * f32(weight(p + "layer_scalar", {1}));
    return h;
  }

  // Gemma 4 per-layer embeddings: [seq, layers, D] from a token table and a projection of h.
  Tensor build_per_layer_inputs(const Tensor& tokens, const Tensor& h) {
    int64_t D = c_.per_layer_input, N = c_.layers;
    Tensor table = weight("model.embed_tokens_per_layer.weight", {c_.per_layer_vocab, N * D});
    Tensor token_part = cast(embedding(table, tokens), DType::F32) * std::sqrt(static_cast<double>(D));
    Tensor projected = proj(h, "model.per_layer_model_projection", N * D, c_.hidden) *
                       (1.0 / std::sqrt(static_cast<double>(c_.hidden)));
    projected = norm(reshape(projected, {seq_, N, D}), "model.per_layer_projection_norm.weight", D);
    return (projected + reshape(token_part, {seq_, N, D})) * (1.0 / std::sqrt(2.0));
  }

  Graph& g_;
  const ModelConfig& c_;
  const DecoderGraphOptions& o_;
  Expr seq_, past_, total_;
  Tensor positions_;
  std::map<std::string, Tensor> weights_;
  std::map<std::string, std::pair<Tensor, Tensor>> rope_;
  std::map<bool, Tensor> masks_;
  std::map<int64_t, Tensor> keys_, values_;
};

}  // namespace

void build_decoder(Graph& g, const ModelConfig& c, const DecoderGraphOptions& o) { DecoderBuilder(g, c, o).build(); }

}  // namespace luminal
