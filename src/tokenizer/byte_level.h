#pragma once
// GPT-2's reversible mapping between bytes and printable characters, which byte-level BPE
// (Llama 3, Qwen, GPT-2, SmolLM) uses so that every byte string is a string of visible symbols.
#include <string>
#include <string_view>

namespace luminal::byte_level {

// Each byte of `bytes` replaced by its character (as UTF-8).
std::string encode(std::string_view bytes);

// Maps the characters of `text` back to bytes, appended to out. Returns false (and leaves out
// unchanged) when a character is outside the alphabet: such tokens decode to their raw text.
bool decode(std::string_view text, std::string& out);

}  // namespace luminal::byte_level
