#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace luminal {
namespace {

// Start of the character that ends just before `pos`.
size_t previous_char(std::string_view text, size_t pos) {
  size_t i = pos - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)), word_char_("\\w", "added-token word boundary") {
  int32_t nodes = 1;  // node 0 is the root
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char b : p) {
      auto [it, inserted] = edges_.emplace((static_cast<uint64_t>(node) << 8) | b, nodes);
      if (inserted) ++nodes;
      node = it->second;
    }
    terminal_.emplace(node, t);  // the first token with a given pattern wins
  }
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::leftmost_longest(std::string_view text) const {
  std::vector<Match> matches;
  for (size_t pos = 0; pos < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t node = 0;
    size_t best_end = 0, best_token = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (auto t = terminal_.find(node); t != terminal_.end()) {
        best_end = i + 1;
        best_token = t->second;
      }
    }
    if (best_end == 0) {
      ++pos;
      continue;
    }
    matches.push_back({pos, best_end, best_token});
    pos = best_end;
  }
  return matches;
}

std::vector<TextPiece> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextPiece> pieces;
  size_t done = 0;  // text before this offset is already in pieces
  for (Match m : leftmost_longest(text)) {
    const AddedToken& tok = tokens_[m.token];
    if (m.begin < done) continue;  // swallowed by the previous token's rstrip
    if (tok.single_word) {
      const bool word_before = m.begin > 0 && word_char_.matches_at(text, previous_char(text, m.begin));
      const bool word_after = m.end < text.size() && word_char_.matches_at(text, m.end);
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      while (m.begin > done) {
        size_t prev = previous_char(text, m.begin), i = prev;
        if (!utf8::is_whitespace(utf8::decode(text, i))) break;
        m.begin = prev;
      }
    }
    if (tok.rstrip) {
      while (m.end < text.size()) {
        size_t i = m.end;
        if (!utf8::is_whitespace(utf8::decode(text, i))) break;
        m.end = i;
      }
    }
    if (m.begin > done) pieces.push_back({done, m.begin, -1});
    pieces.push_back({m.begin, m.end, tok.id});
    done = m.end;
  }
  if (done < text.size()) pieces.push_back({done, text.size(), -1});
  return pieces;
}

}  // namespace luminal
