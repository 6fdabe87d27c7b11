#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

std::string replace_all(std::string_view text, std::string_view find, std::string_view with) {
  if (find.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(find, pos)) != std::string_view::npos; pos = hit + find.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(with);
  }
  out.append(text.substr(pos));
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xAB>" -> the byte 0xAB; anything else -> -1.
int byte_token_value(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  const int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string strip(std::string s, std::string_view content, size_t start, size_t stop) {
  if (content.empty()) return s;
  size_t begin = 0;
  for (size_t k = 0; k < start && s.compare(begin, content.size(), content) == 0; ++k) begin += content.size();
  size_t end = s.size();
  for (size_t k = 0; k < stop && end >= begin + content.size() &&
                     s.compare(end - content.size(), content.size(), content) == 0;
       ++k)
    end -= content.size();
  return s.substr(begin, end - begin);
}

}  // namespace

void Decoder::add_byte_level() { (fused_ ? whole_text_ : per_token_).push_back({Step::Kind::ByteLevel, {}, {}}); }

void Decoder::add_replace(std::string find, std::string with) {
  (fused_ ? whole_text_ : per_token_).push_back({Step::Kind::Replace, std::move(find), std::move(with)});
}

void Decoder::add_byte_fallback() { (fused_ ? whole_text_ : per_token_).push_back({Step::Kind::ByteFallback, {}, {}}); }

void Decoder::add_fuse() { fused_ = true; }

void Decoder::add_strip(std::string content, size_t start, size_t stop) {
  (fused_ ? whole_text_ : per_token_).push_back({Step::Kind::Strip, std::move(content), {}, start, stop});
}

DecodeState::DecodeState(const Decoder& decoder) : decoder_(&decoder) {
  for (const auto& step : decoder.whole_text_)
    strip_left_.push_back(step.kind == Decoder::Step::Kind::Strip ? step.start : 0);
}

std::string DecodeState::token_bytes(std::string_view token) const {
  std::string s(token);
  for (const auto& step : decoder_->per_token_) {
    switch (step.kind) {
      case Decoder::Step::Kind::ByteLevel: {
        std::string bytes;
        if (byte_level::decode(s, bytes)) s = std::move(bytes);  // else: keep the raw text
        break;
      }
      case Decoder::Step::Kind::Replace:
        s = replace_all(s, step.a, step.b);
        break;
      case Decoder::Step::Kind::ByteFallback:
        if (int b = byte_token_value(s); b >= 0) s = std::string(1, static_cast<char>(b));
        break;
      case Decoder::Step::Kind::Strip:
        s = strip(std::move(s), step.a, step.start, step.stop);
        break;
    }
  }
  return s;
}

void DecodeState::push_token(std::string_view token) {
  std::string piece = token_bytes(token);
  if (decoder_->join_with_spaces_ && !first_token_) piece.insert(piece.begin(), ' ');
  first_token_ = false;
  const auto& steps = decoder_->whole_text_;
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto& step = steps[k];
    if (step.kind == Decoder::Step::Kind::Replace) {
      piece = replace_all(piece, step.a, step.b);
    } else if (step.kind == Decoder::Step::Kind::Strip && strip_left_[k] > 0 && !step.a.empty()) {
      size_t begin = 0;
      while (strip_left_[k] > 0 && piece.compare(begin, step.a.size(), step.a) == 0) {
        begin += step.a.size();
        --strip_left_[k];
      }
      if (begin < piece.size()) strip_left_[k] = 0;  // stripping stops at the first other character
      piece.erase(0, begin);
    }
  }
  pending_ += piece;
}

std::string DecodeState::take_text(bool final) {
  std::string out;
  const size_t used = utf8::append_lossy(out, pending_, !final);
  pending_.erase(0, used);
  return out;
}

}  // namespace luminal
