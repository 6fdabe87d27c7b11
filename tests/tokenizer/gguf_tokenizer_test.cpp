// Tokenizer::from_gguf on GGUF files written by the test: the Llama 3 and Gemma 3 vocabularies
// re-packed as llama.cpp stores them ("gpt2" with merges; "llama" with scores), checked against
// the Hugging Face fixture ids, plus metadata handling and errors on tiny files.
#include <gtest/gtest.h>

#include <stdexcept>
#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"
#include "gguf_writer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

using json = nlohmann::json;
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kByte = 6;

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::pair<std::string, std::string>> merges;
};

// The vocabulary of a tokenizer.json, with added tokens typed the way llama.cpp's converter does.
Vocab vocab_of(const json& doc) {
  Vocab v;
  for (const auto& [text, id] : doc["model"]["vocab"].items()) {
    const size_t i = id.get<size_t>();
    if (v.tokens.size() <= i) v.tokens.resize(i + 1);
    v.tokens[i] = text;
  }
  for (const json& a : doc["added_tokens"]) {
    const size_t i = a["id"].get<size_t>();
    if (v.tokens.size() <= i) v.tokens.resize(i + 1);
    v.tokens[i] = a["content"];
  }
  v.types.assign(v.tokens.size(), kNormal);
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>') v.types[i] = kByte;
  }
  for (const json& a : doc["added_tokens"]) v.types[a["id"].get<size_t>()] = a["special"].get<bool>() ? kControl : kUserDefined;
  for (const json& m : doc["model"]["merges"]) {
    if (m.is_string()) {
      const std::string s = m;
      v.merges.emplace_back(s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1));
    } else {
      v.merges.emplace_back(m[0], m[1]);
    }
  }
  return v;
}

json load_json(const std::string& name) { return json::parse(test::xz_decompress(test::tokenizer_data_dir() + "/" + name + "/tokenizer.json.xz")); }

struct FixtureCase {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<FixtureCase> fixture(const std::string& model) {
  std::ifstream in(test::tokenizer_data_dir() + "/tokenizer_encodings.json");
  const json doc = json::parse(in);  // named: a range-for over a temporary's member dangles
  std::vector<FixtureCase> out;
  for (const json& e : doc["encodings"][model]) out.push_back({e["text"], e["ids"]});
  if (out.empty()) throw std::runtime_error("no fixture strings for " + model);
  return out;
}

GgufFile write_and_open(const test::GgufWriter& w, const std::string& name) {
  return GgufFile::open(test::write_temp_file(name, w.bytes()));
}

TEST(GgufTokenizer, Gpt2ModelMatchesHuggingFaceOnLlama3Vocabulary) {
  const Vocab v = vocab_of(load_json("llama3"));
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "llama-bpe");
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  w.add_i32s("tokenizer.ggml.token_type", v.types);
  std::vector<std::string> merges;
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  w.add_strings("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.bos_token_id", 128000);
  w.add_u32("tokenizer.ggml.eos_token_id", 128001);
  w.add_u32("tokenizer.ggml.eot_token_id", 128009);
  w.add_string("tokenizer.chat_template", "{{ '<|start_header_id|>' }}");
  const Tokenizer tok = Tokenizer::from_gguf(write_and_open(w, "llama3.gguf"));

  for (const FixtureCase& c : fixture("llama3")) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(tok.encode(c.text, false), c.ids);
    EXPECT_EQ(tok.decode(c.ids, false), c.text);
    // llama.cpp adds BOS for the llama-bpe pre-tokenizer unless add_bos_token says otherwise.
    std::vector<int32_t> with_bos{128000};
    with_bos.insert(with_bos.end(), c.ids.begin(), c.ids.end());
    EXPECT_EQ(tok.encode(c.text, true), with_bos);
  }
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{128001, 128009}));
  EXPECT_TRUE(tok.is_special(128009));
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.chat_template(), "{{ '<|start_header_id|>' }}");
}

// Gemma's GGUF stores SentencePiece scores instead of merges. Scores that follow the merge order
// (the earlier a merge, the higher its result's score) must reproduce the ranked-merge encoding.
TEST(GgufTokenizer, LlamaModelMatchesHuggingFaceOnGemma3Vocabulary) {
  const Vocab v = vocab_of(load_json("gemma3"));
  std::vector<float> scores(v.tokens.size(), 0.0f);
  std::vector<bool> scored(v.tokens.size(), false);
  std::unordered_map<std::string, size_t> id_of;
  for (size_t i = 0; i < v.tokens.size(); ++i) id_of.emplace(v.tokens[i], i);
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    const size_t id = id_of.at(v.merges[rank].first + v.merges[rank].second);
    if (!scored[id]) scores[id] = -static_cast<float>(rank) - 1.0f;
    scored[id] = true;
  }
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  w.add_f32s("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", v.types);
  w.add_u32("tokenizer.ggml.bos_token_id", 2);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  w.add_u32("tokenizer.ggml.unknown_token_id", 3);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  const Tokenizer tok = Tokenizer::from_gguf(write_and_open(w, "gemma3.gguf"));

  for (const FixtureCase& c : fixture("gemma3")) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(tok.encode(c.text, false), c.ids);
    EXPECT_EQ(tok.decode(c.ids, false), c.text);
    EXPECT_EQ(tok.encode(c.text, true).front(), 2);  // "llama" models add BOS by default
  }
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{1});
}

// A tiny SentencePiece vocabulary: the dummy-prefix space, scores deciding between merges, byte
// fallback for unknown characters, and the leading space removed again on decode.
TEST(GgufTokenizer, LlamaModelUsesScoresSpacePrefixAndByteFallback) {
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "\xE2\x96\x81", "a", "b",
                                           "c", "ab", "bc", "\xE2\x96\x81" "a", "\xE2\x96\x81" "abc"};
  const std::vector<int32_t> types = {2, kControl, kControl, kByte, kByte, 1, 1, 1, 1, 1, 1, 1, 1};
  // "bc" outscores "ab", so "abc" is a + bc; "▁abc" needs "▁a" + "bc".
  const std::vector<float> scores = {0, 0, 0, 0, 0, -1, -2, -3, -4, -20, -10, -5, -6};
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_f32s("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_eos_token", true);
  const Tokenizer tok = Tokenizer::from_gguf(write_and_open(w, "tiny_spm.gguf"));

  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{12}));          // ▁abc (via ▁a + bc)
  EXPECT_EQ(tok.encode("cabc", false), (std::vector<int32_t>{5, 8, 6, 10}));  // ▁ c a bc
  EXPECT_EQ(tok.encode("a\xC3\xA9", false), (std::vector<int32_t>{11, 3, 4}));
  EXPECT_EQ(tok.encode("abc", true), (std::vector<int32_t>{1, 12, 2}));
  EXPECT_EQ(tok.decode({1, 12, 5, 6, 3, 4, 2}, true), "abc a\xC3\xA9");
  EXPECT_EQ(tok.decode({1, 12}, false), "<s> abc");
}

// A tiny byte-level vocabulary with SmolLM2's pre-tokenizer: digits split one by one.
TEST(GgufTokenizer, Gpt2ModelSplitsDigitsForSmolLM) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "1", "2", "3", "\xC4\xA0", "h", "i",
                                     "12", "\xC4\xA0h", "\xC4\xA0hi", "\n"};
  // "\n" is byte 0x0A: in the GPT-2 alphabet it is U+010A.
  tokens.back() = "\xC4\x8A";
  const std::vector<int32_t> types = {kControl, kControl, kControl, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "smollm");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", {"1 2", "\xC4\xA0 h", "\xC4\xA0h i"});
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  const Tokenizer tok = Tokenizer::from_gguf(write_and_open(w, "tiny_smollm.gguf"));

  // Without the digit split "123" would be one piece and merge to 12 + 3.
  EXPECT_EQ(tok.encode("123 hi", false), (std::vector<int32_t>{3, 4, 5, 11}));
  EXPECT_EQ(tok.encode("<|im_start|>hi\n<|im_end|>", true), (std::vector<int32_t>{1, 7, 8, 12, 2}));
  EXPECT_EQ(tok.decode({1, 3, 11, 2}, true), "1 hi");
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_FALSE(tok.is_special(11));
}

void expect_error(const test::GgufWriter& w, const std::string& name, const std::vector<std::string>& parts) {
  const GgufFile file = write_and_open(w, name);
  try {
    Tokenizer::from_gguf(file);
    ADD_FAILURE() << "expected luminal::Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(GgufTokenizer, ErrorsNameTheProblem) {
  test::GgufWriter none;
  none.add_string("general.architecture", "llama");
  expect_error(none, "no_tokenizer.gguf", {"no_tokenizer.gguf", "tokenizer.ggml.model"});

  test::GgufWriter bert;
  bert.add_string("tokenizer.ggml.model", "bert");
  bert.add_strings("tokenizer.ggml.tokens", {"a"});
  expect_error(bert, "bert.gguf", {"bert.gguf", "'bert'", "not supported"});

  test::GgufWriter pre;
  pre.add_string("tokenizer.ggml.model", "gpt2");
  pre.add_string("tokenizer.ggml.pre", "mystery");
  pre.add_strings("tokenizer.ggml.tokens", {"a"});
  pre.add_strings("tokenizer.ggml.merges", {});
  expect_error(pre, "pre.gguf", {"pre.gguf", "'mystery'", "qwen2"});

  test::GgufWriter merges;
  merges.add_string("tokenizer.ggml.model", "gpt2");
  merges.add_string("tokenizer.ggml.pre", "gpt-2");
  merges.add_strings("tokenizer.ggml.tokens", {"a", "b"});
  merges.add_strings("tokenizer.ggml.merges", {"a b"});
  expect_error(merges, "merges.gguf", {"merges.gguf", "'a b'"});
}

}  // namespace
}  // namespace luminal
