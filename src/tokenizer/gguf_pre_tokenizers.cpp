#include "tokenizer/gguf_pre_tokenizers.h"

namespace luminal {
namespace {

// GPT-2's pattern as llama.cpp writes it (without the final "|\s+": leftover whitespace still
// becomes its own piece).
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3's and Qwen2's patterns as their tokenizer.json files state them.
constexpr const char* kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name) {
  if (name.empty() || name == "default")
    return GgufPreTokenizer{{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}};
  if (is_one_of(name, {"gpt-2", "gpt2", "phi-2", "mpt", "olmo"})) return GgufPreTokenizer{{kGpt2}};
  if (is_one_of(name, {"llama3", "llama-v3", "llama-bpe"})) return GgufPreTokenizer{{kLlama3}, true, true};
  if (is_one_of(name, {"dbrx", "smaug-bpe"})) return GgufPreTokenizer{{kLlama3}};
  if (is_one_of(name, {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})) return GgufPreTokenizer{{kQwen2}};
  if (is_one_of(name, {"smollm", "starcoder", "refact", "command-r"}))
    return GgufPreTokenizer{{"\\p{N}", kGpt2}};
  return std::nullopt;
}

std::string known_gguf_pre_tokenizers() {
  return "default, gpt-2, phi-2, mpt, olmo, llama3, llama-v3, llama-bpe, dbrx, smaug-bpe, qwen2, "
         "deepseek-r1-qwen, stablelm2, megrez, smollm, starcoder, refact, command-r";
}

}  // namespace luminal
