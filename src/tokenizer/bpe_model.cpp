#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"

namespace luminal {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t k) {  // splitmix64 finaliser
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ULL;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebULL;
  return k ^ (k >> 31);
}

struct Symbol {
  int32_t id;
  int32_t prev, next;  // neighbours in the word, -1 at the ends
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // the left symbol
  int32_t merged;
  // std::priority_queue pops the greatest: make that the lowest rank, then the leftmost.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void BpeModel::MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  if (cap <= keys_.size()) return;
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  keys_.assign(cap, kEmpty);
  values_.assign(cap, Merge{0, 0});
  count_ = 0;
  for (size_t i = 0; i < old_keys.size(); ++i)
    if (old_keys[i] != kEmpty) insert(old_keys[i], old_values[i]);
}

void BpeModel::MergeTable::grow() { reserve(keys_.empty() ? 8 : keys_.size()); }

void BpeModel::MergeTable::insert(uint64_t key, Merge m) {
  if ((count_ + 1) * 2 > keys_.size()) grow();
  const size_t mask = keys_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == key) {
      values_[i] = m;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      values_[i] = m;
      ++count_;
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(uint64_t key) const {
  if (keys_.empty()) return nullptr;
  const size_t mask = keys_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == key) return &values_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(std::vector<std::string> tokens, BpeOptions options)
    : tokens_(std::move(tokens)), options_(options) {
  ids_ = TokenIndex(tokens_);
  if (options_.byte_fallback) {
    byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (auto id = token_to_id(name)) byte_ids_[b] = *id;
    }
  }
}

void BpeModel::reserve_merges(size_t n) { merges_.reserve(n); }

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  merges_.insert(pair_key(left, right), Merge{rank, merged});
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  return ids_.find(token);
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || id >= size() || tokens_[id].empty()) return nullptr;
  return &tokens_[id];
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }

  // Initial symbols: one per character, or its byte tokens, or unk.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, true});
    if (n > 0) symbols[n - 1].next = n;
  };
  bool pending_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(utf8::char_length(static_cast<unsigned char>(word[i])), word.size() - i);
    const std::string_view ch = word.substr(i, len);
    i += len;
    if (auto id = token_to_id(ch)) {
      if (pending_unk) add(*options_.unk_id);
      pending_unk = false;
      add(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all_bytes = true;
      for (unsigned char b : ch) all_bytes = all_bytes && byte_ids_[b] >= 0;
      if (all_bytes) {
        if (pending_unk) add(*options_.unk_id);
        pending_unk = false;
        for (unsigned char b : ch) add(byte_ids_[b]);
        continue;
      }
    }
    if (options_.unk_id) {  // without an unk token an unknown character is dropped
      if (pending_unk && !options_.fuse_unk) add(*options_.unk_id);
      pending_unk = true;
    }
  }
  if (pending_unk) add(*options_.unk_id);

  if (symbols.size() > 1) {
    std::vector<Candidate> storage;
    storage.reserve(symbols.size() * 2);
    std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
    auto consider = [&](int32_t left) {
      const int32_t right = symbols[left].next;
      if (right < 0) return;
      if (const Merge* m = merges_.find(pair_key(symbols[left].id, symbols[right].id)))
        queue.push({m->rank, left, m->merged});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);

    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = symbols[left.next];
      // Stale entries: the pair at this position changed since the candidate was queued.
      const Merge* m = merges_.find(pair_key(left.id, right.id));
      if (!m || m->merged != top.merged) continue;
      left.id = top.merged;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.pos;
      if (left.prev >= 0) consider(left.prev);
      consider(top.pos);
    }
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace luminal
