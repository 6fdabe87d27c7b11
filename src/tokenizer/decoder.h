#pragma once
// The decoder stage: turns token texts back into text. Every supported Hugging Face decoder step
// works token by token (ByteLevel, Replace, ByteFallback, per-token Strip) or, after Fuse, on the
// text start only (Strip of leading characters), so decoding is a left-to-right stream: ids can
// be pushed one at a time and the text so far never changes. Bytes become UTF-8 at the very end,
// with invalid sequences replaced by U+FFFD as Rust's from_utf8_lossy does.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace luminal {

class Decoder {
 public:
  void add_byte_level();
  void add_replace(std::string find, std::string with);
  void add_byte_fallback();
  void add_fuse();
  // Removes up to `start` leading and `stop` trailing copies of `content` (one character).
  // After Fuse, `stop` must be 0 (trailing text is not known while streaming); the loaders check.
  void add_strip(std::string content, size_t start, size_t stop);
  // Without any decoder Hugging Face joins tokens with spaces.
  void set_join_with_spaces(bool on) { join_with_spaces_ = on; }
  bool fused() const { return fused_; }

  struct Step {
    enum class Kind { ByteLevel, Replace, ByteFallback, Strip } kind;
    std::string a, b;  // Replace: find, with; Strip: content
    size_t start = 0, stop = 0;
  };

 private:
  friend class DecodeState;
  std::vector<Step> per_token_;    // before Fuse: applied to each token
  std::vector<Step> whole_text_;   // after Fuse: Replace per piece, Strip at the text start
  bool fused_ = false;
  bool join_with_spaces_ = false;
};

// Decoding in progress: push token texts, take the text that is final so far.
class DecodeState {
 public:
  explicit DecodeState(const Decoder& decoder);
  void push_token(std::string_view token);
  // Text completed since the last call. Unless `final`, bytes of a character that is not yet
  // complete are held back; with `final` they become U+FFFD.
  std::string take_text(bool final);

 private:
  std::string token_bytes(std::string_view token) const;
  const Decoder* decoder_;
  std::string pending_;             // bytes not yet returned
  std::vector<size_t> strip_left_;  // per post-Fuse step: leading characters Strip may still remove
  bool first_token_ = true;
};

}  // namespace luminal
