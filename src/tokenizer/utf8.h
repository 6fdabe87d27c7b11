#pragma once
// UTF-8 helpers shared by the tokenizer: decoding code points, and turning arbitrary bytes into
// valid UTF-8 the way Rust's String::from_utf8_lossy does (Hugging Face `tokenizers` does that
// when it decodes byte-level tokens, so matching it keeps our decode() identical to theirs).
#include <cstddef>
#include <string>
#include <string_view>

namespace luminal::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;

// Appends the UTF-8 encoding of cp to out.
void append(std::string& out, char32_t cp);

// Decodes the code point starting at s[i] and advances i past it. s must be valid UTF-8.
char32_t decode(std::string_view s, size_t& i);

// Byte length of the character starting with this lead byte (1 for a byte that cannot start one).
size_t char_length(unsigned char lead);

// Offset of the first byte that is not part of valid UTF-8, or npos when s is valid.
size_t first_invalid(std::string_view s);

// Appends bytes to out, replacing each maximal invalid subsequence by U+FFFD. When
// hold_incomplete_tail is set, a sequence at the end that is valid so far but cut short is not
// consumed (it may complete once more bytes arrive). Returns the number of bytes consumed.
size_t append_lossy(std::string& out, std::string_view bytes, bool hold_incomplete_tail);

// Unicode White_Space (what Rust's char::is_whitespace and regex \s accept).
bool is_whitespace(char32_t cp);

}  // namespace luminal::utf8
