#pragma once
// The pre-tokenizer stage: splits normalized text into words that BPE encodes independently
// (and, for byte-level BPE, maps each word's bytes to the GPT-2 alphabet).
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"

namespace luminal {

// What a Split does with the pieces its pattern matches (Hugging Face's names).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  // `invert`: the pattern describes the text between pieces rather than the pieces.
  void add_split(Regex pattern, SplitBehavior behavior, bool invert);
  // `use_regex`: first split with GPT-2's pattern; `add_prefix_space`: put a space in front of
  // every piece that does not start with one.
  void add_byte_level(bool add_prefix_space, bool use_regex);

  // Steps run in order, each on every piece the previous ones produced; empty pieces vanish.
  std::vector<std::string> apply(std::string text) const;

 private:
  struct Split {
    Regex pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    std::optional<Regex> gpt2;  // set when the step splits with GPT-2's pattern
  };
  std::vector<std::variant<Split, ByteLevel>> steps_;
};

// GPT-2's pre-tokenizer pattern (also used by ByteLevel with use_regex).
inline constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace luminal
