#include "models/llama_graph.h"

#include <cmath>
#include <limits>
#include <string>

namespace luminal {
namespace {

// Rotary embedding on [heads, seq, head_dim] (rotate-half form, as in Hugging Face Llama).
Tensor rope(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  Expr d = x.dim(-1);
  Expr half = d / 2;
  Tensor x1 = slice(x, -1, 0, half), x2 = slice(x, -1, half, d);
  Tensor rotated = concat({neg(x2), x1}, -1);
  return x * cos_t + rotated * sin_t;
}

}  // namespace

void build_llama(Graph& g, const LlamaShape& s) {
  Expr seq = Expr::var("seq"), past = Expr::var("past");
  Expr total = past + seq;
  DType wt = s.weight_dtype;
  Tensor tokens = input(g, "tokens", DType::I32, {seq});
  Tensor embed = input(g, "embed", wt, {s.vocab, s.hidden});
  Tensor h = cast(embedding(embed, tokens), DType::F32);  // [seq, hidden]

  // Rotary tables for absolute positions past .. past+seq-1: [seq, head_dim].
  Tensor pos = cast(iota(g, past + Expr::index(), seq), DType::F32);
  Tensor inv_freq = exp(cast(arange(g, 0, s.head_dim / 2), DType::F32) *
                        (-2.0 * std::log(s.rope_theta) / static_cast<double>(s.head_dim)));
  Tensor angles = unsqueeze(pos, 1) * unsqueeze(inv_freq, 0);  // [seq, head_dim/2]
  Tensor angles_full = concat({angles, angles}, 1);
  Tensor cos_t = cos(angles_full), sin_t = sin(angles_full);

  // Causal mask over the cache plus this step: query i sees keys j <= past + i.
  Expr z = Expr::index();
  Tensor causal = reshape(cast(iota(g, lt(z % total, z / total + past + 1), seq * total), DType::Bool), {seq, total});
  double neg_inf = -std::numeric_limits<double>::infinity();
  int64_t group = s.heads / s.kv_heads;

  for (int64_t l = 0; l < s.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    auto w = [&](const std::string& name, Shape shape) { return input(g, p + name, wt, shape); };
    Tensor attn_norm = w("attn_norm", {s.hidden});
    Tensor wq = w("wq", {s.heads * s.head_dim, s.hidden});
    Tensor wk = w("wk", {s.kv_heads * s.head_dim, s.hidden});
    Tensor wv = w("wv", {s.kv_heads * s.head_dim, s.hidden});
    Tensor wo = w("wo", {s.hidden, s.heads * s.head_dim});
    Tensor mlp_norm = w("mlp_norm", {s.hidden});
    Tensor w_gate = w("w_gate", {s.intermediate, s.hidden});
    Tensor w_up = w("w_up", {s.intermediate, s.hidden});
    Tensor w_down = w("w_down", {s.hidden, s.intermediate});
    Tensor k_cache = input(g, p + "k_cache", DType::F32, {s.kv_heads, past, s.head_dim});
    Tensor v_cache = input(g, p + "v_cache", DType::F32, {s.kv_heads, past, s.head_dim});

    Tensor x = rms_norm(h, cast(attn_norm, DType::F32), s.rms_eps);
    Tensor q = permute(reshape(linear(x, cast(wq, DType::F32), std::nullopt), {seq, s.heads, s.head_dim}), {1, 0, 2});
    Tensor k = permute(reshape(linear(x, cast(wk, DType::F32), std::nullopt), {seq, s.kv_heads, s.head_dim}), {1, 0, 2});
    Tensor v = permute(reshape(linear(x, cast(wv, DType::F32), std::nullopt), {seq, s.kv_heads, s.head_dim}), {1, 0, 2});
    q = rope(q, cos_t, sin_t);
    k = rope(k, cos_t, sin_t);
    Tensor k_all = concat({k_cache, k}, 1);  // [kv_heads, total, head_dim]
    Tensor v_all = concat({v_cache, v}, 1);
    k_all.output(p + "k_out");
    v_all.output(p + "v_out");
    // Grouped-query attention: each kv head serves `group` query heads (a broadcast view).
    auto per_head = [&](const Tensor& t) {
      return reshape(expand(unsqueeze(t, 1), {s.kv_heads, group, total, s.head_dim}), {s.heads, total, s.head_dim});
    };
    Tensor scores = matmul(q, transpose(per_head(k_all), 1, 2)) * (1.0 / std::sqrt(static_cast<double>(s.head_dim)));
    scores = where(causal, scores, neg_inf);
    Tensor attn = matmul(softmax(scores, -1), per_head(v_all));  // [heads, seq, head_dim]
    Tensor merged = reshape(permute(attn, {1, 0, 2}), {seq, s.heads * s.head_dim});
    h = h + linear(merged, cast(wo, DType::F32), std::nullopt);

    Tensor y = rms_norm(h, cast(mlp_norm, DType::F32), s.rms_eps);
    Tensor gate = silu(linear(y, cast(w_gate, DType::F32), std::nullopt));
    Tensor up = linear(y, cast(w_up, DType::F32), std::nullopt);
    h = h + linear(gate * up, cast(w_down, DType::F32), std::nullopt);
  }
  Tensor norm = input(g, "norm", wt, {s.hidden});
  Tensor lm_head = input(g, "lm_head", wt, {s.vocab, s.hidden});
  linear(rms_norm(h, cast(norm, DType::F32), s.rms_eps), cast(lm_head, DType::F32), std::nullopt).output("logits");
}

}  // namespace luminal
