#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

AddedTokenMatcher make_matcher(const TokenizerParts& parts, bool normalized) {
  std::vector<AddedToken> tokens;
  std::vector<std::string> patterns;
  for (const AddedToken& t : parts.added_tokens) {
    if (t.normalized != normalized) continue;
    tokens.push_back(t);
    // A normalized token is looked for in its normalized form, as it would appear in the text.
    patterns.push_back(normalized ? parts.normalizer.apply(t.content) : t.content);
  }
  return AddedTokenMatcher(std::move(tokens), patterns);
}

}  // namespace

Tokenizer::Impl::Impl(TokenizerParts p)
    : parts(std::move(p)), raw_matcher(make_matcher(parts, false)), normalized_matcher(make_matcher(parts, true)) {
  vocab_size = parts.model.size();
  for (const AddedToken& t : parts.added_tokens) {
    // Hugging Face gives a normalized token's text in its normalized form (decode, id_to_token).
    AddedToken shown = t;
    if (t.normalized) shown.content = parts.normalizer.apply(t.content);
    added_by_id[t.id] = std::move(shown);
    added_by_content.emplace(t.content, t.id);
    vocab_size = std::max<int64_t>(vocab_size, int64_t{t.id} + 1);
  }
  bos_id = parts.bos_id ? parts.bos_id : parts.post_processor.leading_special();
}

void Tokenizer::Impl::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) {
    parts.model.encode_word(word, out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  parts.model.encode_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() < kCacheCapacity) cache.emplace(word, std::move(ids));
}

const std::string* Tokenizer::Impl::token_text(int32_t id) const {
  if (auto it = added_by_id.find(id); it != added_by_id.end()) return &it->second.content;
  return parts.model.token(id);
}

Tokenizer make_tokenizer(TokenizerParts parts) {
  return Tokenizer(std::make_shared<const Tokenizer::Impl>(std::move(parts)));
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (size_t bad = utf8::first_invalid(text); bad != std::string_view::npos) {
    throw Error("Tokenizer::encode: the text is not valid UTF-8 (byte " + std::to_string(bad) +
                "); pass UTF-8 text");
  }
  const Impl& im = *impl_;
  std::vector<int32_t> ids;
  for (const TextPiece& raw : im.raw_matcher.split(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string normalized = im.parts.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin));
    for (const TextPiece& piece : im.normalized_matcher.split(normalized)) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      for (const std::string& word : im.parts.pre_tokenizer.apply(normalized.substr(piece.begin, piece.end - piece.begin)))
        im.encode_word(word, ids);
    }
  }
  return add_special_tokens ? im.parts.post_processor.apply(std::move(ids)) : ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  StreamDecoder stream(*this, skip_special_tokens);
  std::string text;
  for (int32_t id : ids) text += stream.push(id);
  return text + stream.flush();
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token)); it != impl_->added_by_content.end())
    return it->second;
  return impl_->parts.model.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const std::string* t = impl_->token_text(id)) return *t;
  throw Error("Tokenizer::id_to_token: no token has id " + std::to_string(id) + " (vocabulary size " +
              std::to_string(impl_->vocab_size) + ")");
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && it->second.special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }

std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->parts.eos_ids; }

std::optional<std::string> Tokenizer::chat_template() const { return impl_->parts.chat_template; }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : impl_(tokenizer.impl_),
      state_(std::make_unique<DecodeState>(impl_->parts.decoder)),
      skip_special_tokens_(skip_special_tokens) {}

StreamDecoder::~StreamDecoder() = default;
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string StreamDecoder::push(int32_t id) {
  const std::string* token = impl_->token_text(id);
  if (!token) return {};  // no such token: skipped, as Hugging Face does
  if (skip_special_tokens_) {
    auto it = impl_->added_by_id.find(id);
    if (it != impl_->added_by_id.end() && it->second.special) return {};
  }
  state_->push_token(*token);
  return state_->take_text(false);
}

std::string StreamDecoder::flush() { return state_->take_text(true); }

}  // namespace luminal
