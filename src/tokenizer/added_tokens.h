#pragma once
// Added tokens (special tokens such as <|im_start|>, and extra plain tokens) are cut out of the
// text before the normalizer and BPE run, so they always encode to their own id. Matching is
// leftmost-longest, like Hugging Face's Aho-Corasick matcher, with its single_word, lstrip and
// rstrip rules.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex.h"

namespace luminal {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens = true)
  bool single_word = false;  // only matches when not inside a word
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool normalized = false;   // matched against normalized text rather than the raw input
};

// A piece of text: either an added token (id >= 0) or text to tokenize normally (id == -1).
struct TextPiece {
  size_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is what to look for to find `tokens[i]` (its content, normalized if it is a
  // normalized token).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  // Splits text into pieces that cover it; pieces of plain text are never empty.
  std::vector<TextPiece> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  struct Match {
    size_t begin, end;
    size_t token;
  };
  std::vector<Match> leftmost_longest(std::string_view text) const;

  std::vector<AddedToken> tokens_;
  // A byte trie: edge (node << 8 | byte) -> child node; terminal node -> index into tokens_.
  std::unordered_map<uint64_t, int32_t> edges_;
  std::unordered_map<int32_t, size_t> terminal_;
  bool first_byte_[256] = {};
  Regex word_char_;
};

}  // namespace luminal
