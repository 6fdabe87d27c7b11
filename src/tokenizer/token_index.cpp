#include "tokenizer/token_index.h"

#include <cstring>

namespace luminal {
namespace {

// FNV-1a over 8-byte words, then a final mix: fast for short token texts.
uint64_t hash_text(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

TokenIndex::TokenIndex(const std::vector<std::string>& tokens) : tokens_(tokens.data()) {
  size_t cap = 16;
  while (cap < tokens.size() * 2) cap *= 2;
  slots_.assign(cap, Slot{0, -1});
  const size_t mask = cap - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    if (t.empty()) continue;
    const uint64_t h = hash_text(t);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {tag, static_cast<int32_t>(id)};
        break;
      }
      if (s.tag == tag && tokens[s.id] == t) break;  // a repeated text keeps its first id
    }
  }
}

std::optional<int32_t> TokenIndex::find(std::string_view text) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t h = hash_text(text);
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return std::nullopt;
    if (s.tag == tag && tokens_[s.id] == text) return s.id;
  }
}

}  // namespace luminal
