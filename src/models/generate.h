#pragma once
// The generate loop: prefill the whole prompt in one step, then decode token by token through
// the KV cache, sampling each next token, streaming text, stopping on eos or a stop string.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/language_model.h"
#include "models/sampler.h"

namespace luminal {

class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  bool ignore_eos = false;
  std::vector<int32_t> eos_ids;           // stop on any of these (besides the model's own)
  std::vector<std::string> stop_strings;  // stop when the text contains one (needs a tokenizer)
};

struct GenerateResult {
  std::vector<int32_t> new_tokens;
  std::string text;            // decoded new tokens (empty without a tokenizer)
  std::string stop_reason;     // "eos", "stop_string", "max_new_tokens", "context"
  double ttft_ms = 0;          // prompt in -> first new token out (the prefill step + sampling)
  double tpot_ms = 0;          // median time per decode step
  std::vector<double> step_ms; // every decode step
};

// `on_text` receives printable text as it is produced (never half a UTF-8 character).
GenerateResult generate(LanguageModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                        const Tokenizer* tokenizer = nullptr,
                        const std::function<void(const std::string&)>& on_text = nullptr);

double median(std::vector<double> v);

// The ids generation stops on by default: the model's eos plus the tokenizer's, and the
// end-of-turn tokens chat models use (<|eot_id|>, <|im_end|>, <end_of_turn>, ...).
std::vector<int32_t> default_stop_ids(const LanguageModel& m, const Tokenizer* tok);

}  // namespace luminal
