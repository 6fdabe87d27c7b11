#pragma once
// Every supported family (Llama 3, Qwen3, Gemma 3, Qwen3-MoE, Mixtral, Gemma 4) as one HLIR
// graph built from a ModelConfig with the tensor frontend.
//
// Inputs: "tokens" i32 [seq]; weights under their Hugging Face names ("model.layers.3.mlp.
// up_proj.weight"; experts fused as "...experts.gate_up_proj" [E, 2I, H] and "...down_proj"
// [E, H, I]); rotary frequencies "rope.<layer type>.<head dim>" f32 [head_dim/2]; KV caches
// "cache.<layer>.k|v" [kv_heads, context, head_dim] (f32, or bf16: kv_dtype), written in place at positions
// past .. past+seq-1. Dims: seq (tokens this step), past (tokens already cached).
// Output: "logits" f32 [seq, vocab], or [1, vocab] for the last position only.
#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "models/model_config.h"

namespace luminal {

struct DecoderGraphOptions {
  int64_t context = 0;           // KV cache length: the most tokens one sequence can hold
  bool all_logits = false;       // logits for every position (else the last one only)
  DType weight_dtype = DType::BF16;
  // The KV caches' element type: f32 (exact), or bf16 (half the memory and half the bytes a
  // decode reads per cached position; keys and values rounded to bf16 as they are written, as
  // llama.cpp's f16 cache rounds them). Anything else is an Error.
  DType kv_dtype = DType::F32;
};

void build_decoder(Graph& g, const ModelConfig& c, const DecoderGraphOptions& o);

std::string cache_input_name(int64_t layer, char kv);  // "cache.3.k"
std::string rope_input_name(const std::string& rope_key, int64_t head_dim);

}  // namespace luminal
