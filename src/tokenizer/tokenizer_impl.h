#pragma once
// Internal: the parts a loader assembles (tokenizer.json or GGUF) and the Tokenizer built on them.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace luminal {

// Everything a loader reads; the Tokenizer adds lookup structures on top.
struct TokenizerParts {
  std::string origin;  // the file it came from, for error messages
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  std::vector<AddedToken> added_tokens;
  PostProcessor post_processor;
  Decoder decoder;
  std::optional<int32_t> bos_id;  // when the metadata names one; else the post-processor's
  std::vector<int32_t> eos_ids;
  std::optional<std::string> chat_template;
};

struct Tokenizer::Impl {
  explicit Impl(TokenizerParts parts);

  // Encoding of one pre-tokenized word, through the word cache.
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;
  // The text of id, or nullptr when no token has it.
  const std::string* token_text(int32_t id) const;

  TokenizerParts parts;
  AddedTokenMatcher raw_matcher;         // added tokens matched on the input as given
  AddedTokenMatcher normalized_matcher;  // added tokens matched after normalization
  std::unordered_map<int32_t, AddedToken> added_by_id;  // content as decode shows it
  std::unordered_map<std::string, int32_t> added_by_content;
  int64_t vocab_size = 0;
  std::optional<int32_t> bos_id;

  // Words repeat a lot in real text; BPE on a cache hit is one lookup. Bounded like Hugging
  // Face's (it stops growing when full); long words (a whole line, for SentencePiece-style
  // tokenizers) rarely repeat and are not kept.
  static constexpr size_t kCacheCapacity = 10000;
  static constexpr size_t kMaxCachedWordBytes = 256;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
};

// Builds a Tokenizer from loader output (defined with the Tokenizer).
Tokenizer make_tokenizer(TokenizerParts parts);

}  // namespace luminal
