#pragma once
// Small graphs that reach every primitive op and every kernel node the compiler emits, with the
// views that make indexing hard (permutes, broadcasts, slices, pads, dynamic dims), and their
// inputs. Shared by the NVRTC compile test (no GPU) and the executor test (GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "graph/graph.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"
#include "runtime/buffer.h"

namespace luminal::cuda::testing {

struct Case {
  std::string name;
  Graph graph;
  // The inputs for a value of the dynamic dim s (bound from their shapes); each case runs at
  // several values.
  std::function<std::map<std::string, Buffer>(int64_t s)> inputs;
};

// A graph's plan with every layer compiled on its own (no deduplication), as the tests read it.
inline Graph compiled(const Graph& g) {
  CompileOptions o;
  o.dedup = false;
  return compile(g, o).plan;
}

// A fixture model's config (tests/data/models/NAME/config.json).
inline ModelConfig fixture_config(const std::string& name) {
  std::ifstream in(std::string(LUMINAL_TEST_DATA) + "/models/" + name + "/config.json");
  std::stringstream s;
  s << in.rdbuf();
  return ModelConfig::from_json_text(s.str(), name);
}

// The compiled plan (compiled, per layer) of the qwen3-moe-tiny fixture's decoder, a 32-token cache.
inline Graph moe_tiny_decoder_plan() {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  build_decoder(g, fixture_config("qwen3-moe-tiny"), o);
  return compiled(g);
}

// A fixture decoder's compiled plan with bf16 weights and a 32-token cache.
inline Graph bf16_decoder_plan(const ModelConfig& config) {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  o.weight_dtype = DType::BF16;
  build_decoder(g, config, o);
  return compile(g, CompileOptions{}).plan;
}
inline Graph bf16_decoder_plan(const std::string& name) { return bf16_decoder_plan(fixture_config(name)); }

// The decoder's top-k choice over a token's `n` values [s, n] (src/models/decoder_graph.cpp,
// route()): 1 where fewer than k values come before it (larger, or equal at a lower index),
// else 0, as a fused count.
inline Tensor top_k_chosen(Graph& g, const Tensor& probs, int64_t n, int64_t k) {
  Tensor mine = unsqueeze(probs, 2), other = unsqueeze(probs, 1);
  Tensor lower = lt(unsqueeze(arange(g, 0, n), 0), unsqueeze(arange(g, 0, n), 1));  // [e, e']: e' < e
  Tensor before = logical_or(gt(other, mine), logical_and(eq(other, mine), lower));
  return cast(lt(sum(cast(before, DType::F32), {2}), full(g, {1}, static_cast<double>(k))), DType::F32);
}

// An MoE's experts as the decoder runs them over h [s, H]: the gate/up experts' inputs scaled by
// `chosen` [s, E], act(gate) * up, the down experts' inputs scaled by `weights` [s, E], the sum
// over experts. Weights are the bf16 inputs "w_gu" [E, 2I, H] and "w_d" [E, H, I].
inline Tensor gated_experts(Graph& g, const Tensor& h, const Tensor& chosen, const Tensor& weights, int64_t E, int64_t I, int64_t H) {
  const Expr s = h.shape()[0];
  Tensor wgu = cast(input(g, "w_gu", DType::BF16, {E, 2 * I, H}), DType::F32);
  Tensor wd = cast(input(g, "w_d", DType::BF16, {E, H, I}), DType::F32);
  auto per_expert = [](const Tensor& r) { return unsqueeze(permute(r, {1, 0}), 2); };  // [E, s, 1]
  Tensor xs = expand(unsqueeze(h, 0), {Expr(E), s, Expr(H)}) * per_expert(chosen);
  Tensor gu = matmul(xs, transpose(wgu, 1, 2));
  Tensor act = silu(slice(gu, -1, 0, I)) * slice(gu, -1, I, 2 * I);
  return sum(matmul(act * per_expert(weights), transpose(wd, 1, 2)), {0});
}

// An MoE block's routing and experts as the decoder writes them, over `hn` (the normed rows) and
// adding `residual`: the router ("router", bf16 [E, H]), its softmax, top-k ranks and
// renormalised weights, the experts (gated_experts), outputs "out" and "weights".
inline void moe_routing_and_experts(Graph& g, const Tensor& residual, const Tensor& hn, int64_t E, int64_t K, int64_t I, int64_t H) {
  Tensor probs = softmax(linear(hn, cast(input(g, "router", DType::BF16, {E, H}), DType::F32), std::nullopt), -1);
  Tensor chosen = top_k_chosen(g, probs, E, K);
  Tensor w = probs * chosen;
  w = w / sum(w, {-1}, true);
  (residual + gated_experts(g, hn, chosen, w, E, I, H)).output("out");
  w.output("weights");
}

// `got` against `want`, element for element, within rel * (1 + |want|); fatal at the first miss
// (callers wrap it in ASSERT_NO_FATAL_FAILURE). `what` and `at` name the value in messages.
inline void assert_near_buffers(const Buffer& want, const Buffer& got, double rel, const std::string& what, const std::string& at) {
  ASSERT_EQ(got.numel(), want.numel()) << what << at;
  for (size_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.get(i), want.get(i), rel * (1 + std::abs(want.get(i)))) << what << "[" << i << "]" << at;
}

inline const std::vector<int64_t>& s_values() {
  static const std::vector<int64_t> v{1, 4, 67};
  return v;
}

inline Buffer random_buffer(DType t, std::vector<int64_t> shape, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return Buffer::f32(v, std::move(shape)).cast(t);
}

inline std::vector<Case> cases() {
  std::vector<Case> r;
  Expr s = Expr::var("s");
  {
    Case c{"elementwise", {}, {}};
    Graph& g = c.graph;
    Tensor x = input(g, "x", DType::F32, {7, s});  // read transposed
    Tensor y = input(g, "y", DType::BF16, {7});
    Tensor xt = transpose(x, 0, 1);                // [s, 7]
    Tensor yf = cast(y, DType::F32);
    Tensor a = add(mul(exp(xt), yf), div(sin(xt), sqrt(add(abs(yf), scalar_like(yf, 1.0)))));
    a.output("a");
    cast(cast(mul(xt, yf), DType::BF16), DType::F16).output("half");
    fmod(xt, scalar_like(xt, 0.7)).output("fmod");
    lt(xt, yf).output("lt");
    mod(cast(mul(xt, scalar_like(xt, 10.0)), DType::I32), cast(scalar_like(xt, 3.0), DType::I32)).output("imod");
    log2(add(abs(xt), scalar_like(xt, 0.5))).output("log2");
    where(gt(xt, scalar_like(xt, 0.0)), xt, neg(xt)).output("where");
    c.inputs = [](int64_t n) {
      return std::map<std::string, Buffer>{{"x", random_buffer(DType::F32, {7, n}, 1)}, {"y", random_buffer(DType::BF16, {7}, 2)}};
    };
    r.push_back(std::move(c));
  }
  {
    Case c{"reductions", {}, {}};
    Graph& g = c.graph;
    Tensor x = input(g, "x", DType::F32, {s, 3, 37});
    Tensor xp = permute(x, {1, 2, 0});  // [3, 37, s]
    sum(xp, {1}).output("sum");
    max(xp, {2}).output("max");
    mean(x, {0, 2}).output("mean");
    argmax(x, 2).output("argmax");
    cumsum(slice(x, 2, 1, 30), 2).output("cumsum");
    softmax(x, 2).output("softmax");
    rms_norm(x, std::nullopt, 1e-5).output("rms");
    rms_norm(x, cast(input(g, "norm_w", DType::BF16, {37}), DType::F32), 1e-5).output("rms_weighted");  // RMSNormMul
    layer_norm(x, 1, std::nullopt, std::nullopt, 1e-5).output("layer_norm");
    logsumexp(xp, {0}).output("lse");
    // Down columns (a short outer axis over rows of 40): an MoE's sum over its experts, with the
    // residual add after it, and a max.
    Tensor y = input(g, "y", DType::F32, {5, s, 40});
    add(sum(mul(y, y), {0}), input(g, "res", DType::F32, {s, 40})).output("expert_sum");
    max(y, {0}).output("column_max");
    c.inputs = [](int64_t n) {
      return std::map<std::string, Buffer>{{"x", random_buffer(DType::F32, {n, 3, 37}, 3)}, {"norm_w", random_buffer(DType::BF16, {37}, 4)},
                                           {"y", random_buffer(DType::F32, {5, n, 40}, 9)}, {"res", random_buffer(DType::F32, {n, 40}, 10)}};
    };
    r.push_back(std::move(c));
  }
  {
    // Rotary embeddings of heads (rotate-half), plain and of a norm over the head (Qwen3's q/k
    // norms: RMSNormRotary), with heads of 36 (one thread's four values span it) and of 200 (64
    // threads; elements past the row in the last slot).
    Case c{"rotary", {}, {}};
    Graph& g = c.graph;
    for (int64_t d : {36, 200}) {
      const std::string tag = std::to_string(d);
      Tensor x = reshape(input(g, "x" + tag, DType::F32, {s, 3 * d}), {s, 3, d});
      Tensor w = cast(input(g, "w" + tag, DType::BF16, {d}), DType::F32);
      Tensor cs = reshape(input(g, "cos" + tag, DType::F32, {s, d}), {s, 1, d});
      Tensor sn = reshape(input(g, "sin" + tag, DType::F32, {s, d}), {s, 1, d});
      auto rope = [&](const Tensor& t) { return t * cs + concat({neg(slice(t, -1, d / 2, d)), slice(t, -1, 0, d / 2)}, -1) * sn; };
      rope(rms_norm(x, w, 1e-6)).output("norm_rope" + tag);
      rope(x).output("rope" + tag);
    }
    c.inputs = [](int64_t n) {
      std::map<std::string, Buffer> in;
      for (int64_t d : {36, 200}) {
        const std::string tag = std::to_string(d);
        const uint32_t seed = static_cast<uint32_t>(20 + d);
        in["x" + tag] = random_buffer(DType::F32, {n, 3 * d}, seed);
        in["w" + tag] = random_buffer(DType::BF16, {d}, seed + 1);
        in["cos" + tag] = random_buffer(DType::F32, {n, d}, seed + 2, -1, 1);
        in["sin" + tag] = random_buffer(DType::F32, {n, d}, seed + 3, -1, 1);
      }
      return in;
    };
    r.push_back(std::move(c));
  }
  {
    Case c{"matmul", {}, {}};
    Graph& g = c.graph;
    Tensor a = input(g, "a", DType::F32, {s, 33});
    Tensor w = input(g, "w", DType::BF16, {19, 33});
    Tensor b = input(g, "b", DType::F32, {2, 33, 5});
    linear(a, cast(w, DType::F32), std::nullopt).output("linear");
    matmul(expand(unsqueeze(a, 0), {2, -1, -1}), b).output("batched");
    matmul(transpose(b, 1, 2), transpose(unsqueeze(a, 0), 1, 2)).output("transposed");
    c.inputs = [](int64_t n) {
      return std::map<std::string, Buffer>{{"a", random_buffer(DType::F32, {n, 33}, 4)},
                                           {"w", random_buffer(DType::BF16, {19, 33}, 5)},
                                           {"b", random_buffer(DType::F32, {2, 33, 5}, 6)}};
    };
    r.push_back(std::move(c));
  }
  {
    Case c{"indexing", {}, {}};
    Graph& g = c.graph;
    Tensor emb = input(g, "emb", DType::BF16, {11, 6});
    Tensor ids = input(g, "ids", DType::I32, {s});
    Tensor cache = input(g, "cache", DType::F32, {9, 6});
    Tensor e = cast(embedding(emb, ids), DType::F32);  // [s, 6]
    e.output("embedding");
    pad(flip(e, {0}), {{1, 2}, {0, 1}}, -1.5).output("pad_flip");
    concat({e, slice(e, 0, 0, 1)}, 0).output("concat");
    scatter(cache, 0, expand(unsqueeze(arange(g, 2, s + 2), 1), {s, 6}), e).output("scatter");
    gather(e, 1, cast(full(g, {s, 2}, 3.0), DType::I32)).output("gather");
    // s <= 7: the scattered rows 2 .. s+1 stay inside the cache (past it they are skipped).
    c.inputs = [](int64_t n) {
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7 + 3) % 11));
      return std::map<std::string, Buffer>{{"emb", random_buffer(DType::BF16, {11, 6}, 7)},
                                           {"ids", Buffer::i32(ids, {n})},
                                           {"cache", random_buffer(DType::F32, {9, 6}, 8)}};
    };
    r.push_back(std::move(c));
  }
  return r;
}

}  // namespace luminal::cuda::testing
