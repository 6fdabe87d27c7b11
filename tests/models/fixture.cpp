#include "models/fixture.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/error.h"
#include "models/language_model.h"

namespace luminal::fixtures {

std::string model_dir(const std::string& name) { return std::string(LUMINAL_TEST_DATA) + "/models/" + name; }

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"llama-tiny",     "qwen3-tiny",  "gemma3-tiny",
                                                 "qwen3-moe-tiny", "gemma4-tiny", "gemma4-moe-tiny"};
  return names;
}

Reference load_reference(const std::string& name) {
  std::ifstream in(model_dir(name) + "/reference.json");
  if (!in) throw std::runtime_error("missing fixture " + name);
  nlohmann::json j = nlohmann::json::parse(in);
  Reference r;
  r.input_ids = j["input_ids"].get<std::vector<int32_t>>();
  r.logits = j["logits"].get<std::vector<std::vector<float>>>();
  r.greedy_new_tokens = j["greedy_new_tokens"].get<std::vector<int32_t>>();
  return r;
}

int32_t argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt, size_t n) {
  const size_t vocab = static_cast<size_t>(m.config().vocab);
  std::vector<float> last = m.step(prompt);
  std::vector<int32_t> got;
  for (size_t i = 0; i < n; ++i) {
    if (last.size() != vocab) throw Error("greedy_decode: logits of " + std::to_string(last.size()) + " values, vocab " + std::to_string(vocab));
    got.push_back(argmax(last.data(), vocab));
    if (i + 1 < n) last = m.step({got.back()});
  }
  return got;
}

}  // namespace luminal::fixtures
