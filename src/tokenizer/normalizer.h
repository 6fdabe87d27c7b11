#pragma once
// The normalizer stage of a Hugging Face tokenizer: text rewrites applied before splitting
// (a "Sequence" is flattened into its steps, which run in order).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace luminal {

class Normalizer {
 public:
  void add_nfc();
  // Replaces every occurrence of a literal (or, with `regex`, every match) by `content`.
  void add_replace(std::string literal, std::optional<Regex> regex, std::string content);
  // Puts `prefix` in front of non-empty text (SentencePiece's dummy "▁" prefix).
  void add_prepend(std::string prefix);

  std::string apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

 private:
  enum class Kind { Nfc, Replace, Prepend };
  struct Step {
    Kind kind;
    std::string literal;         // Replace: what to find (when regex is unset)
    std::optional<Regex> regex;  // Replace: pattern form
    std::string content;         // Replace: replacement; Prepend: the prefix
  };
  std::vector<Step> steps_;
};

}  // namespace luminal
