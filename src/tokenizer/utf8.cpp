#include "tokenizer/utf8.h"

namespace luminal::utf8 {
namespace {

// Result of examining one sequence: how many bytes it spans and whether it is a valid character,
// invalid (those bytes become one U+FFFD), or a valid prefix cut off by the end of the input.
enum class SeqKind { Valid, Invalid, Truncated };
struct Seq {
  SeqKind kind;
  size_t len;
};

// The second byte's allowed range depends on the lead byte (no overlongs, no surrogates, <= U+10FFFF).
Seq examine(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {SeqKind::Valid, 1};
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {SeqKind::Invalid, 1};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {SeqKind::Truncated, k};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {SeqKind::Invalid, k};
  }
  return {SeqKind::Valid, need + 1};
}

}  // namespace

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t char_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

char32_t decode(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = char_length(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0;
  }
  char32_t cp = b0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

size_t first_invalid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Seq q = examine(s, i);
    if (q.kind != SeqKind::Valid) return i;
    i += q.len;
  }
  return std::string_view::npos;
}

size_t append_lossy(std::string& out, std::string_view bytes, bool hold_incomplete_tail) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Seq q = examine(bytes, i);
    if (q.kind == SeqKind::Valid) {
      out.append(bytes.data() + i, q.len);
    } else if (q.kind == SeqKind::Truncated && hold_incomplete_tail) {
      return i;
    } else {
      append(out, kReplacement);
    }
    i += q.len;
  }
  return i;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace luminal::utf8
