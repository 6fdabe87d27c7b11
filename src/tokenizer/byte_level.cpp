#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace luminal::byte_level {
namespace {

// Printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes take
// the code points 256, 257, ... in byte order. Every code point in the alphabet is below 324.
constexpr char32_t kAlphabetEnd = 324;

struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, kAlphabetEnd> byte_of_char{};
  std::array<std::string, 256> utf8_of_byte;
};

Alphabet make_alphabet() {
  Alphabet a;
  a.byte_of_char.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t c = printable ? static_cast<char32_t>(b) : next++;
    a.char_of_byte[b] = c;
    a.byte_of_char[c] = static_cast<int16_t>(b);
    utf8::append(a.utf8_of_byte[b], c);
  }
  return a;
}

const Alphabet& alphabet() {
  static const Alphabet a = make_alphabet();  // immutable after first use
  return a;
}

}  // namespace

std::string encode(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += a.utf8_of_byte[b];
  return out;
}

bool decode(std::string_view text, std::string& out) {
  const Alphabet& a = alphabet();
  const size_t start = out.size();
  for (size_t i = 0; i < text.size();) {
    const char32_t c = utf8::decode(text, i);
    if (c >= kAlphabetEnd || a.byte_of_char[c] < 0) {
      out.resize(start);
      return false;
    }
    out += static_cast<char>(a.byte_of_char[c]);
  }
  return true;
}

}  // namespace luminal::byte_level
