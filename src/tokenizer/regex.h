#pragma once
// A compiled PCRE2 pattern with Unicode semantics (UTF + UCP), JIT-compiled when PCRE2 supports
// it. Pre-tokenizer patterns use \p{L}, \p{N} and look-ahead, which std::regex cannot run.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luminal {

class Regex {
 public:
  // Throws luminal::Error naming `origin` (e.g. the tokenizer file) when the pattern is invalid.
  Regex(const std::string& pattern, const std::string& origin);

  // [begin, end) byte ranges of the successive non-overlapping, non-empty matches in text,
  // which must be valid UTF-8.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // Whether the pattern matches text starting exactly at byte `at`.
  bool matches_at(std::string_view text, size_t at) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;  // immutable once compiled, so copies share it
};

// `literal` with every regex metacharacter escaped.
std::string regex_escape(std::string_view literal);

}  // namespace luminal
