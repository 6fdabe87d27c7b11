#pragma once
// Byte-pair encoding of one pre-tokenized word: start from characters (or byte tokens when a
// character is not in the vocabulary) and repeatedly apply the lowest-ranked merge, as Hugging
// Face's BPE model does (ties go to the leftmost pair). A heap of candidate merges keeps a word of
// n characters at O(n log n).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"

namespace luminal {

struct BpeOptions {
  bool byte_fallback = false;  // unknown characters become <0xXX> byte tokens
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  bool fuse_unk = false;       // consecutive unknown characters become one unk token
  std::optional<int32_t> unk_id;
};

class BpeModel {
 public:
  BpeModel() = default;
  // tokens[id] is the text of token id; an empty string marks an id the vocabulary lacks. When
  // two ids share a text, token_to_id gives the first.
  BpeModel(std::vector<std::string> tokens, BpeOptions options);

  // ids_ points at tokens_: moving keeps that valid (the vector's buffer moves), copying would not.
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;
  BpeModel(BpeModel&&) = default;
  BpeModel& operator=(BpeModel&&) = default;

  // left + right merge into `merged`; a lower rank merges first. A pair given twice keeps the
  // last rank given, as Hugging Face's map building does.
  void add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank);
  void reserve_merges(size_t n);

  // Appends the ids of `word`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* token(int32_t id) const;  // nullptr for an id outside the vocabulary
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  // Open addressing on (left, right) packed into 64 bits: merges are looked up for every
  // adjacent pair of every word, so this is the hot path.
  class MergeTable {
   public:
    void reserve(size_t n);
    void insert(uint64_t key, Merge m);
    const Merge* find(uint64_t key) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    size_t count_ = 0;
    void grow();
  };

  std::vector<std::string> tokens_;
  TokenIndex ids_;  // over tokens_
  std::vector<int32_t> byte_ids_;  // <0xXX> token of each byte, or -1
  MergeTable merges_;
  BpeOptions options_;
};

}  // namespace luminal
