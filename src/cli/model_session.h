#pragma once
// What the model commands share: the model options, loading a model and its tokenizer with a
// progress line on a terminal, and parsing "--ids".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "models/language_model.h"
#include "models/model_files.h"
#include "tokenizer/tokenizer.h"

namespace luminal::cli {

void add_model_options(Args& a);  // --model --context --search --backend --cache --no-cache
ModelOptions model_options(const Args& a, bool all_logits = false);
LanguageModel load_model(const Args& a, bool all_logits = false);

// The tokenizer of a model folder (tokenizer.json), a .gguf file, or a tokenizer.json path;
// nullopt when a folder has none.

std::vector<int32_t> parse_ids(const std::string& text);  // "1 2 3" or "1,2,3"
std::string json_ids(const std::vector<int32_t>& ids);
size_t peak_rss_bytes();

}  // namespace luminal::cli
