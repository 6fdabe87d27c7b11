#pragma once
// Text <-> token ids for the LLMs luminal runs, loaded from a Hugging Face tokenizer.json or from
// a GGUF file's metadata. Encoding matches Hugging Face `tokenizers` id for id on the supported
// pipelines (byte-level BPE as in Llama 3 / Qwen / SmolLM, SentencePiece-style BPE with byte
// fallback as in Gemma); see docs/tokenizer.md for what is supported.
//
// A Tokenizer is cheap to copy (copies share one immutable vocabulary) and safe to use from
// several threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal {

class GgufFile;
class DecodeState;
struct TokenizerParts;

class Tokenizer {
 public:
  // A Hugging Face tokenizer.json. When tokenizer_config.json / generation_config.json sit next
  // to it, their bos/eos tokens and chat template are read too. Throws luminal::Error for a
  // missing file, malformed JSON, or a component this library does not implement.
  static Tokenizer from_json_file(const std::string& path);
  // The text of a tokenizer.json (no neighbouring config files).
  static Tokenizer from_json_text(const std::string& text);
  // The tokenizer stored in GGUF metadata (tokenizer.ggml.*): "gpt2" (byte-level BPE) and
  // "llama" (SentencePiece with scores and <0xXX> byte tokens) models.
  static Tokenizer from_gguf(const GgufFile& gguf);

  // Added tokens (<|im_start|>, <start_of_turn>, ...) in the text always map to their ids;
  // `add_special_tokens` applies the post-processor (e.g. prepends BOS). Throws luminal::Error
  // when text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids without a token are skipped (models often have more embedding rows than tokens).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's text as stored in the vocabulary; throws luminal::Error for an unknown id.
  std::string id_to_token(int32_t id) const;
  int64_t vocab_size() const;  // one past the largest id, added tokens included
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;  // from the post-processor, config or GGUF metadata
  std::vector<int32_t> eos_ids() const;   // from GGUF metadata or config files; empty if unknown
  // The Jinja chat template (tokenizer_config.json's or tokenizer.chat_template), if known.
  std::optional<std::string> chat_template() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
  friend Tokenizer make_tokenizer(TokenizerParts parts);
};

// Streaming decode for generation: push ids one by one and print what comes back. The
// concatenation of all push() results and flush() equals decode() of all ids. It never returns
// part of a UTF-8 character: bytes from byte tokens are held back until their character is
// complete, and SentencePiece's leading-space removal happens once, at the start.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  ~StreamDecoder();
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;

  std::string push(int32_t id);
  // Whatever is still held back (an unfinished character becomes U+FFFD). Call it at the end.
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer::Impl> impl_;
  std::unique_ptr<DecodeState> state_;
  bool skip_special_tokens_;
};

}  // namespace luminal
