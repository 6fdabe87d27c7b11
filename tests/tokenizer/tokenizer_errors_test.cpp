// Errors a user can cause: each is a luminal::Error whose message names the thing and the file.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected luminal::Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
  }
}

// A minimal valid tokenizer.json with one component replaced.
std::string tokenizer_json(const std::string& field, const std::string& value) {
  std::string normalizer = "null", pre = "null", decoder = "null", post = "null";
  std::string model = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  if (field == "normalizer") normalizer = value;
  if (field == "pre_tokenizer") pre = value;
  if (field == "decoder") decoder = value;
  if (field == "post_processor") post = value;
  if (field == "model") model = value;
  return R"({"version": "1.0", "added_tokens": [], "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre +
         R"(, "post_processor": )" + post + R"(, "decoder": )" + decoder + R"(, "model": )" + model + "}";
}

TEST(TokenizerErrors, MinimalFileLoads) {
  const Tokenizer tok = Tokenizer::from_json_text(tokenizer_json("", ""));
  EXPECT_EQ(tok.encode("aab", false), (std::vector<int32_t>{0, 2}));
}

TEST(TokenizerErrors, MissingFile) {
  expect_error([] { Tokenizer::from_json_file("/nonexistent/dir/tokenizer.json"); },
               {"/nonexistent/dir/tokenizer.json", "cannot open"});
}

TEST(TokenizerErrors, MalformedJson) {
  expect_error([] { Tokenizer::from_json_text("{\"model\": {\"type\": \"BPE\", "); }, {"malformed JSON"});
  const std::string path = test::write_temp_file("broken/tokenizer.json", "{\"version\": 1.0,,}");
  expect_error([&] { Tokenizer::from_json_file(path); }, {path, "malformed JSON"});
  expect_error([] { Tokenizer::from_json_text("[1, 2]"); }, {"not a tokenizer.json"});
  expect_error([] { Tokenizer::from_json_text(R"({"version": "1.0"})"); }, {"no \"model\""});
}

TEST(TokenizerErrors, UnsupportedModelTypeNamesTypeAndFile) {
  const std::string path = test::write_temp_file(
      "wordpiece/tokenizer.json",
      tokenizer_json("model", R"({"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}})"));
  expect_error([&] { Tokenizer::from_json_file(path); }, {path, "'WordPiece'", "not supported"});
  expect_error([] { Tokenizer::from_json_text(tokenizer_json("model", R"({"type": "Unigram", "vocab": [["a", 0.0]]})")); },
               {"'Unigram'", "not supported"});
}

TEST(TokenizerErrors, UnsupportedComponentsNameTypeAndFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"normalizer", R"({"type": "NFKC"})"},
      {"pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]})"},
      {"decoder", R"({"type": "WordPiece", "prefix": "##", "cleanup": true})"},
      {"post_processor", R"({"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]})"},
  };
  for (const auto& [field, value] : cases) {
    SCOPED_TRACE(field);
    const std::string type = value.substr(value.rfind("\"type\": \"") + 9, value.find('"', value.rfind("\"type\": \"") + 9) -
                                                                         value.rfind("\"type\": \"") - 9);
    const std::string path = test::write_temp_file(field + "/tokenizer.json", tokenizer_json(field, value));
    expect_error([&] { Tokenizer::from_json_file(path); }, {path, "'" + type + "'", "not supported"});
  }
  expect_error([] { Tokenizer::from_json_text(tokenizer_json("decoder", R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "ByteFallback"}]})")); },
               {"'ByteFallback' after Fuse"});
}

TEST(TokenizerErrors, BadMergesAndRegex) {
  expect_error([] { Tokenizer::from_json_text(tokenizer_json("model", R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]})")); },
               {"merge \"a c\"", "'c'"});
  expect_error([] { Tokenizer::from_json_text(tokenizer_json("model", R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["abc"]})")); },
               {"\"abc\"", "two tokens"});
  expect_error([] {
    Tokenizer::from_json_text(tokenizer_json(
        "pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})"));
  }, {"regex", "(unclosed"});
}

TEST(TokenizerErrors, BadInputToEncodeAndLookups) {
  const Tokenizer tok = Tokenizer::from_json_text(tokenizer_json("", ""));
  expect_error([&] { tok.encode("ab\xFF", false); }, {"not valid UTF-8", "byte 2"});
  expect_error([&] { tok.id_to_token(3); }, {"id 3"});
  expect_error([&] { tok.id_to_token(-1); }, {"id -1"});
  EXPECT_EQ(tok.decode({0, 99, 2}, false), "a ab");  // unknown ids are skipped, as Hugging Face does
  EXPECT_EQ(tok.token_to_id("zz"), std::nullopt);
}

}  // namespace
}  // namespace luminal
