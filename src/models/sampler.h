#pragma once
// Picks the next token from logits: greedy, or sampling with the usual transformers warpers in
// their order (repetition penalty, temperature, top-k, top-p, min-p), seeded for reproducibility.
#include <cstdint>
#include <random>
#include <vector>

namespace luminal {

struct SamplingOptions {
  double temperature = 0;          // 0: greedy (argmax)
  int64_t top_k = 0;               // 0: off
  double top_p = 1.0;              // 1: off
  double min_p = 0;                // 0: off
  double repetition_penalty = 1.0; // 1: off (CTRL-style: positive logits divided, negative multiplied)
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& o);
  // `history` is every token so far (prompt and generated), for the repetition penalty.
  int32_t next(std::vector<float> logits, const std::vector<int32_t>& history);
  // Whether the choice is the largest logit alone (no temperature, no penalty): a model may then
  // find it where its logits are (LanguageModel::step_greedy).
  bool greedy() const { return o_.temperature == 0 && o_.repetition_penalty == 1.0; }

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
};

}  // namespace luminal
