#pragma once
// A Llama-architecture decoder as an HLIR graph, from shape hyperparameters alone. It is the
// workload for compiler benchmarks and the starting point of the model families (issue #4),
// which add config.json parsing and weights.
#include <cstdint>

#include "frontend/ops.h"

namespace luminal {

struct LlamaShape {
  int64_t vocab = 128256;
  int64_t hidden = 4096;
  int64_t intermediate = 14336;
  int64_t layers = 32;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 128;
  double rms_eps = 1e-5;
  double rope_theta = 500000.0;
  DType weight_dtype = DType::BF16;

  static LlamaShape llama3_8b() { return {}; }
  static LlamaShape tiny() { return {256, 64, 128, 2, 4, 2, 16, 1e-5, 10000.0, DType::F32}; }
};

// Inputs: "tokens" i32 [seq]; per layer "layers.N.{attn_norm,wq,wk,wv,wo,mlp_norm,w_gate,w_up,
// w_down}" and KV caches "layers.N.{k,v}_cache" [kv_heads, past, head_dim]; "embed", "norm",
// "lm_head". Outputs: "logits" [seq, vocab] and "layers.N.{k,v}_out" (the caches extended
// by this step). Dims: seq (tokens this step) and past (tokens already cached).
void build_llama(Graph& g, const LlamaShape& s);

}  // namespace luminal
