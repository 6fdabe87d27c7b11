// format_chat against the text each family's Jinja chat template renders (Hugging Face's
// apply_chat_template settings: trim_blocks, lstrip_blocks), written out literally.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat_format.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

using Chat = std::vector<ChatMessage>;

TEST(ChatFormat, Llama3TrimsContentAndStartsWithBos) {
  EXPECT_EQ(format_chat(ChatStyle::Llama3, {{"system", "You are a bot."}, {"user", "  Hi there \n"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a bot.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(format_chat(ChatStyle::Llama3, {{"user", "Q"}, {"assistant", "A"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>");
}

TEST(ChatFormat, GemmaFoldsSystemIntoFirstTurnAndNamesTheModel) {
  const Chat chat = {{"system", "Be brief."}, {"user", " What is 2+2? "}, {"assistant", "4\n"}, {"user", "And 3+3?"}};
  EXPECT_EQ(format_chat(ChatStyle::Gemma, chat, true),
            "<bos><start_of_turn>user\nBe brief.\n\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n4<end_of_turn>\n"
            "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(format_chat(ChatStyle::Gemma, {{"user", "Hi"}}, false), "<bos><start_of_turn>user\nHi<end_of_turn>\n");
}

TEST(ChatFormat, GemmaRejectsRolesThatDoNotAlternate) {
  try {
    format_chat(ChatStyle::Gemma, {{"user", "a"}, {"user", "b"}}, true);
    FAIL() << "expected luminal::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("alternate"), std::string::npos) << e.what();
  }
}

TEST(ChatFormat, ChatMLKeepsContentAsIs) {
  EXPECT_EQ(format_chat(ChatStyle::ChatML, {{"system", "S"}, {"user", " U "}}, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U <|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormat, Qwen3DropsOldReasoningAndPromptsWithoutThinking) {
  const Chat chat = {{"system", "S"}, {"user", "Q1"}, {"assistant", "<think>\nplan\n</think>\n\nAnswer one."}, {"user", "Next?"}};
  EXPECT_EQ(format_chat(ChatStyle::Qwen3, chat, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nAnswer one.<|im_end|>\n<|im_start|>user\nNext?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatFormat, Qwen3KeepsThinkBlocksAfterTheLastQuery) {
  EXPECT_EQ(format_chat(ChatStyle::Qwen3, {{"user", "Q"}, {"assistant", "Sure."}}, false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nSure.<|im_end|>\n");
  EXPECT_EQ(format_chat(ChatStyle::Qwen3,
                        {{"user", "Q"}, {"assistant", "<think>\n\nthought\n\n</think>\n\n\nA"}, {"assistant", "B"}}, false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nthought\n</think>\n\nA<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nB<|im_end|>\n");
}

TEST(ChatFormat, Qwen3GroupsToolResponsesIntoOneUserTurn) {
  const Chat chat = {{"user", "What's the weather?"}, {"assistant", "Let me check."}, {"tool", "{\"temp\": 20}"},
                     {"tool", "{\"wind\": 5}"}};
  EXPECT_EQ(format_chat(ChatStyle::Qwen3, chat, true),
            "<|im_start|>user\nWhat's the weather?<|im_end|>\n<|im_start|>assistant\nLet me check.<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response>\n<tool_response>\n{\"wind\": 5}\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatFormat, RecognisesFamiliesFromRealTemplates) {
  EXPECT_EQ(chat_style_from_template(*test::real_tokenizer("llama3").chat_template()), ChatStyle::Llama3);
  EXPECT_EQ(chat_style_from_template(*test::real_tokenizer("qwen3").chat_template()), ChatStyle::Qwen3);
  EXPECT_EQ(chat_style_from_template(*test::real_tokenizer("gemma3").chat_template()), ChatStyle::Gemma);
  // SmolLM2's template (as its GGUF stores it): plain ChatML.
  EXPECT_EQ(chat_style_from_template(
                "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"),
            ChatStyle::ChatML);
  EXPECT_EQ(chat_style_from_template("{{ messages }}"), std::nullopt);
}

// The formatted prompt encodes to the family's special-token ids (encode without adding BOS again).
TEST(ChatFormat, FormattedPromptsEncodeToSpecialTokens) {
  const auto llama = test::real_tokenizer("llama3").encode(format_chat(ChatStyle::Llama3, {{"user", "Hi"}}, true), false);
  EXPECT_EQ(llama, (std::vector<int32_t>{128000, 128006, 882, 128007, 271, 13347, 128009, 128006, 78191, 128007, 271}));
  const auto gemma = test::real_tokenizer("gemma3").encode(format_chat(ChatStyle::Gemma, {{"user", "Hi"}}, true), false);
  EXPECT_EQ(gemma, (std::vector<int32_t>{2, 105, 2364, 107, 10979, 106, 107, 105, 4368, 107}));
}

}  // namespace
}  // namespace luminal
