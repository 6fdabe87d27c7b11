// Tokenizer::from_gguf on a real GGUF vocabulary, checked id for id against llama.cpp.
//
// smollm2_vocab.gguf.xz is SmolLM2-135M-Instruct's GGUF (llama architecture, tokenizer.ggml.model
// "gpt2", pre "smollm", add_bos_token false) with all its metadata and no tensors;
// smollm2_llamacpp_ids.json holds llama.cpp's ids for varied strings (English, contractions,
// digits, whitespace runs, code, many scripts, emoji, the chat markers and other special tokens).
// Both are made by scripts/make_llamacpp_tokenizer_data.py. Every recorded string is checked:
// none is left out.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

using json = nlohmann::json;

struct LlamaCppCase {
  std::string text;
  std::vector<int32_t> ids;              // llama_tokenize(add_special=false, parse_special=true)
  std::vector<int32_t> ids_add_special;  // llama_tokenize(add_special=true, parse_special=true)
};

const Tokenizer& smollm2() {
  static const Tokenizer tok = [] {
    const std::string path = test::write_temp_file(
        "smollm2_vocab.gguf", test::xz_decompress(test::tokenizer_data_dir() + "/smollm2_vocab.gguf.xz"));
    return Tokenizer::from_gguf(GgufFile::open(path));
  }();
  return tok;
}

const std::vector<LlamaCppCase>& cases() {
  static const std::vector<LlamaCppCase> all = [] {
    std::ifstream in(test::tokenizer_data_dir() + "/smollm2_llamacpp_ids.json");
    const json doc = json::parse(in);  // named: a range-for over a temporary's member would dangle
    std::vector<LlamaCppCase> out;
    for (const json& c : doc["cases"]) out.push_back({c["text"], c["ids"], c["ids_add_special"]});
    return out;
  }();
  return all;
}

// The text with control characters and non-ASCII bytes escaped, for failure messages.
std::string escaped(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    char buf[8];
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"' || c == '\\') (out += '\\') += static_cast<char>(c);
    else if (c < 0x20 || c >= 0x7f) std::snprintf(buf, sizeof buf, "\\x%02x", c), out += buf;
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string describe(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    out << (i ? ", " : "") << ids[i];
    try {
      out << " " << escaped(tok.id_to_token(ids[i]));
    } catch (const std::exception&) {
      out << " ?";
    }
  }
  return out.str() + "]";
}

TEST(GgufLlamaCpp, DataCoversTheCases) {
  EXPECT_GE(cases().size(), 40u);
  size_t with_special_tokens = 0, non_ascii = 0;
  for (const auto& c : cases()) {
    with_special_tokens += c.text.find("<|im_start|>") != std::string::npos;
    non_ascii += std::any_of(c.text.begin(), c.text.end(), [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; });
  }
  EXPECT_GE(with_special_tokens, 3u);
  EXPECT_GE(non_ascii, 8u);
}

TEST(GgufLlamaCpp, MetadataOfSmolLM2) {
  const Tokenizer& tok = smollm2();
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);
  ASSERT_FALSE(tok.eos_ids().empty());
  EXPECT_EQ(tok.eos_ids()[0], 2);
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 1);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 2);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_TRUE(tok.is_special(16));  // <empty_output>, the last of the 17 control tokens
  EXPECT_FALSE(tok.is_special(17));
  ASSERT_TRUE(tok.chat_template().has_value());
  EXPECT_NE(tok.chat_template()->find("<|im_start|>"), std::string::npos);
}

TEST(GgufLlamaCpp, EncodeMatchesLlamaCpp) {
  const Tokenizer& tok = smollm2();
  size_t failures = 0;
  for (const auto& c : cases()) {
    const std::vector<int32_t> got = tok.encode(c.text, false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << "text " << escaped(c.text) << "\n  llama.cpp: " << describe(tok, c.ids)
                    << "\n  luminal:   " << describe(tok, got);
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << cases().size() << " strings";
}

// add_bos_token is false in this GGUF, so neither llama.cpp nor luminal adds BOS.
TEST(GgufLlamaCpp, EncodeWithSpecialTokensMatchesLlamaCpp) {
  const Tokenizer& tok = smollm2();
  size_t failures = 0;
  for (const auto& c : cases()) {
    const std::vector<int32_t> got = tok.encode(c.text, true);
    if (got != c.ids_add_special) {
      ++failures;
      ADD_FAILURE() << "text " << escaped(c.text) << "\n  llama.cpp: " << describe(tok, c.ids_add_special)
                    << "\n  luminal:   " << describe(tok, got);
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << cases().size() << " strings";
}

// Byte-level BPE loses nothing: llama.cpp's ids decode back to the text, special tokens kept.
TEST(GgufLlamaCpp, LlamaCppIdsDecodeBackToTheText) {
  const Tokenizer& tok = smollm2();
  for (const auto& c : cases()) {
    EXPECT_EQ(escaped(tok.decode(c.ids, false)), escaped(c.text)) << "ids " << describe(tok, c.ids);
  }
}

// Dropping the special tokens removes exactly their text.
TEST(GgufLlamaCpp, DecodeSkipsSpecialTokens) {
  const Tokenizer& tok = smollm2();
  EXPECT_EQ(tok.decode(tok.encode("<|im_start|>user\nHi<|im_end|>\n", false), true), "user\nHi\n");
}

}  // namespace
}  // namespace luminal
