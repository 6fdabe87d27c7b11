#pragma once
// Opens what a model path holds: a Hugging Face folder (config.json, generation_config.json,
// safetensors) or a GGUF file, as one config and one weight store.
#include <memory>
#include <optional>
#include <string>

#include "models/model_config.h"
#include "models/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace luminal {

struct ModelFiles {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  bool is_gguf = false;
};

ModelFiles open_model_files(const std::string& path);

bool is_gguf_path(const std::string& path);

// The tokenizer of a model path: a GGUF file's own, a folder's tokenizer.json (nullopt when the
// folder has none), or a tokenizer.json given directly. Error for a path that does not exist.
std::optional<Tokenizer> open_tokenizer(const std::string& path);

}  // namespace luminal
