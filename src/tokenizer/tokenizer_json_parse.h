#pragma once
// Parsing of tokenizer.json text. The vocabulary and merges (up to hundreds of thousands of
// entries) are streamed straight into flat vectors; only the small rest of the document becomes
// a JSON tree. Building a tree for all of it would triple the load time of a Gemma tokenizer.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace luminal {

struct TokenizerJsonTables {
  bool has_vocab = false;   // model.vocab was an object of token -> id
  bool has_merges = false;  // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;
  // Each merge as its two halves; the "a b" string form is split at its space.
  std::vector<std::pair<std::string, std::string>> merges;
};

// Throws luminal::Error naming `origin` for malformed JSON or malformed merges.
nlohmann::json parse_tokenizer_json(const std::string& text, const std::string& origin,
                                    TokenizerJsonTables& tables);

}  // namespace luminal
