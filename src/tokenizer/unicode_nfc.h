#pragma once
// Unicode Normalization Form C (canonical decomposition, then canonical composition), which
// the Qwen tokenizers apply before splitting text. Tables come from unicode_nfc_data.inc.
#include <string>
#include <string_view>

namespace luminal {

// NFC of valid UTF-8 text.
std::string to_nfc(std::string_view text);

}  // namespace luminal
