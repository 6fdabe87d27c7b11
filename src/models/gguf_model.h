#pragma once
// GGUF checkpoints as llama.cpp writes them: the config from metadata, the weights under their
// Hugging Face names (with llama.cpp's layout changes undone, quantized blocks dequantized).
#include <memory>
#include <string>

#include "models/model_config.h"
#include "models/weight_store.h"

namespace luminal {

class GgufFile;

ModelConfig config_from_gguf(const GgufFile& f);
std::unique_ptr<WeightStore> open_gguf_weights(const std::string& path, const ModelConfig& c);

}  // namespace luminal
