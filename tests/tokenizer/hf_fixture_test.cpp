// Encodings of real tokenizers against Hugging Face `tokenizers` (tests/data/tokenizers/
// tokenizer_encodings.json): ids with and without special tokens, decoded text, and streaming.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

struct Case {
  std::string model, text, decoded;
  std::vector<int32_t> ids, ids_with_special;
};

std::vector<Case> load_cases(const std::string& file) {
  std::ifstream in(test::tokenizer_data_dir() + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  const auto doc = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& [model, list] : doc.at("encodings").items()) {
    for (const auto& e : list) {
      cases.push_back({model, e.at("text"), e.at("decoded"), e.at("ids").get<std::vector<int32_t>>(),
                       e.at("ids_with_special").get<std::vector<int32_t>>()});
    }
  }
  return cases;
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  StreamDecoder stream(tok, skip_special);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.flush();
}

class HfFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixture, EncodesDecodesAndStreamsLikeHuggingFace) {
  const auto cases = load_cases(GetParam());
  ASSERT_FALSE(cases.empty());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + ": \"" + c.text + "\"");
    const Tokenizer& tok = test::real_tokenizer(c.model);
    EXPECT_EQ(tok.encode(c.text, false), c.ids);
    EXPECT_EQ(tok.encode(c.text, true), c.ids_with_special);
    EXPECT_EQ(tok.decode(c.ids, false), c.decoded);
    EXPECT_EQ(tok.decode(c.ids_with_special, true), tok.decode(c.ids, true));
    EXPECT_EQ(stream_decode(tok, c.ids, false), tok.decode(c.ids, false));
    EXPECT_EQ(stream_decode(tok, c.ids_with_special, true), tok.decode(c.ids_with_special, true));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFixture, ::testing::Values("tokenizer_encodings.json", "extra_encodings.json"));

}  // namespace
}  // namespace luminal
