#pragma once
// The pre-tokenizer regexes that GGUF files name in tokenizer.ggml.pre, as llama.cpp maps them
// (src/llama-vocab.cpp). Each regex splits every piece further, keeping matches and gaps.
#include <optional>
#include <string>
#include <vector>

namespace luminal {

struct GgufPreTokenizer {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // llama.cpp sets it for the Llama 3 family
  bool add_bos = false;        // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
};

// nullopt for a name this library does not know.
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name);

// The names gguf_pre_tokenizer knows, for error messages.
std::string known_gguf_pre_tokenizers();

}  // namespace luminal
