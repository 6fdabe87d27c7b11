// What a Tokenizer knows besides encoding: vocabulary size, special tokens, BOS/EOS (from the
// post-processor and the config files next to tokenizer.json) and the chat template.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

TEST(TokenizerMetadata, RealTokenizers) {
  const Tokenizer& llama = test::real_tokenizer("llama3");
  EXPECT_EQ(llama.vocab_size(), 128256);
  EXPECT_EQ(llama.bos_id(), 128000);  // from tokenizer_config.json (its post-processor adds none)
  EXPECT_EQ(llama.eos_ids(), std::vector<int32_t>{128001});
  EXPECT_TRUE(llama.is_special(128009));
  EXPECT_FALSE(llama.is_special(9906));
  EXPECT_EQ(llama.token_to_id("<|eot_id|>"), 128009);
  EXPECT_EQ(llama.id_to_token(9906), "Hello");

  const Tokenizer& qwen = test::real_tokenizer("qwen3");
  EXPECT_EQ(qwen.vocab_size(), 151669);
  EXPECT_EQ(qwen.bos_id(), std::nullopt);
  EXPECT_EQ(qwen.eos_ids(), std::vector<int32_t>{151645});
  EXPECT_TRUE(qwen.is_special(151644));
  EXPECT_FALSE(qwen.is_special(151667));  // <think> is an added token but not a special one
  EXPECT_EQ(qwen.decode({151667, 151668}, true), "<think></think>");

  const Tokenizer& gemma = test::real_tokenizer("gemma3");
  EXPECT_EQ(gemma.vocab_size(), 262145);
  EXPECT_EQ(gemma.bos_id(), 2);
  EXPECT_EQ(gemma.eos_ids(), std::vector<int32_t>{106});
  EXPECT_EQ(gemma.id_to_token(107), "\n");
  EXPECT_NE(gemma.chat_template()->find("<start_of_turn>"), std::string::npos);
}

TEST(TokenizerMetadata, FromJsonTextHasNoConfigFiles) {
  std::ifstream in(test::tokenizer_data_dir() + "/synthetic/byte_level_splits.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const Tokenizer tok = Tokenizer::from_json_text(ss.str());
  EXPECT_EQ(tok.chat_template(), std::nullopt);
  EXPECT_TRUE(tok.eos_ids().empty());
}

// generation_config.json's eos list joins tokenizer_config.json's eos token; a chat template
// given as a list of named templates yields the "default" one.
TEST(TokenizerMetadata, ReadsConfigFilesNextToTokenizerJson) {
  std::ifstream in(test::tokenizer_data_dir() + "/synthetic/sentencepiece_bpe.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string path = test::write_temp_file("with_configs/tokenizer.json", ss.str());
  test::write_temp_file("with_configs/tokenizer_config.json",
                        R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
                            "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  test::write_temp_file("with_configs/generation_config.json", R"({"eos_token_id": [2, 34]})");
  const Tokenizer tok = Tokenizer::from_json_file(path);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{2, 34}));
  EXPECT_EQ(tok.chat_template(), "D");
}

}  // namespace
}  // namespace luminal
