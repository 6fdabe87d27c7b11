#pragma once
// The Hugging Face reference fixtures in tests/data/models/<name>: config.json,
// model.safetensors and reference.json (prompt ids, fp32 logits per position, greedy tokens),
// all made by transformers.
#include <cstdint>
#include <string>
#include <vector>

namespace luminal {
class LanguageModel;
}

namespace luminal::fixtures {

struct Reference {
  std::vector<int32_t> input_ids;
  std::vector<std::vector<float>> logits;  // [position][vocab]
  std::vector<int32_t> greedy_new_tokens;
};

std::string model_dir(const std::string& name);
Reference load_reference(const std::string& name);
const std::vector<std::string>& model_names();

int32_t argmax(const float* v, size_t n);

// Greedy decoding through the KV cache: prefills `prompt`, then picks the argmax token `n`
// times, feeding each back (as the fixtures' greedy_new_tokens were made).
std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt, size_t n);

}  // namespace luminal::fixtures
