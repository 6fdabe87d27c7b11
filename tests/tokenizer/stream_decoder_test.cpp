// StreamDecoder: pushing ids one at a time gives exactly decode()'s text, never part of a UTF-8
// character, and SentencePiece's leading space is removed once.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

using Ids = std::vector<int32_t>;

// Every chunk push() returned, then flush()'s.
std::vector<std::string> stream_chunks(const Tokenizer& tok, const Ids& ids, bool skip_special) {
  StreamDecoder stream(tok, skip_special);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(stream.push(id));
  chunks.push_back(stream.flush());
  return chunks;
}

std::string joined(const std::vector<std::string>& chunks) {
  std::string s;
  for (const auto& c : chunks) s += c;
  return s;
}

bool is_byte_token(const Tokenizer& tok, int32_t id) {
  const std::string t = tok.id_to_token(id);
  return t.size() == 6 && t.rfind("<0x", 0) == 0;
}

// Gemma spells rare characters with <0xXX> byte tokens; Llama 3 splits emoji bytes across tokens.
TEST(StreamDecoder, HoldsBackBytesUntilTheCharacterIsComplete) {
  const std::string text = "DNA \xF0\x9F\xA7\xAC, \xF0\xA0\x80\x80\xF0\xA0\x80\x81 and \xEE\x80\x80 \xF0\x9F\x9A\x80\xF0\x9F\x94\xA5";
  for (const char* name : {"gemma3", "llama3", "qwen3"}) {
    SCOPED_TRACE(name);
    const Tokenizer& tok = test::real_tokenizer(name);
    const Ids ids = tok.encode(text, false);
    const auto chunks = stream_chunks(tok, ids, true);
    for (const auto& c : chunks) EXPECT_EQ(utf8::first_invalid(c), std::string::npos) << "chunk is not valid UTF-8";
    EXPECT_EQ(joined(chunks), text);
    EXPECT_EQ(joined(chunks), tok.decode(ids, true));
    EXPECT_EQ(chunks.back(), "");  // nothing left for flush: every character completed
  }
  // In Gemma the CJK character U+20000 is four byte tokens: the first three print nothing, the
  // fourth all of it.
  const Tokenizer& gemma = test::real_tokenizer("gemma3");
  const Ids cjk = gemma.encode("\xF0\xA0\x80\x80", false);
  ASSERT_EQ(cjk.size(), 4u);
  for (int32_t id : cjk) ASSERT_TRUE(is_byte_token(gemma, id)) << gemma.id_to_token(id);
  EXPECT_EQ(stream_chunks(gemma, cjk, true), (std::vector<std::string>{"", "", "", "\xF0\xA0\x80\x80", ""}));
}

TEST(StreamDecoder, BrokenByteSequencesBecomeReplacementCharacters) {
  const Tokenizer& gemma = test::real_tokenizer("gemma3");
  const int32_t f0 = *gemma.token_to_id("<0xF0>"), e2 = *gemma.token_to_id("<0xE2>"), x82 = *gemma.token_to_id("<0x82>");
  const int32_t a = gemma.encode("a", false).at(0);
  // A lead byte followed by an ordinary token can never complete: U+FFFD, then the token.
  EXPECT_EQ(stream_chunks(gemma, {f0, a}, true), (std::vector<std::string>{"", "\xEF\xBF\xBD" "a", ""}));
  EXPECT_EQ(gemma.decode({f0, a}, true), "\xEF\xBF\xBD" "a");
  // An unfinished character at the end comes out of flush() as one U+FFFD.
  EXPECT_EQ(stream_chunks(gemma, {a, e2, x82}, true), (std::vector<std::string>{"a", "", "", "\xEF\xBF\xBD"}));
  EXPECT_EQ(gemma.decode({a, e2, x82}, true), "a\xEF\xBF\xBD");
}

TEST(StreamDecoder, RemovesSentencePieceLeadingSpaceOnce) {
  const Tokenizer tok = Tokenizer::from_json_file(test::tokenizer_data_dir() + "/synthetic/sentencepiece_bpe.json");
  // <s> ▁hello ▁world: the space of the first word (after skipped BOS) goes, the second stays.
  EXPECT_EQ(stream_chunks(tok, {1, 24, 31}, true), (std::vector<std::string>{"", "hello", " world", ""}));
  EXPECT_EQ(stream_chunks(tok, {1, 24, 31}, false), (std::vector<std::string>{"<s>", " hello", " world", ""}));
}

TEST(StreamDecoder, SkipsSpecialTokensByDefault) {
  const Tokenizer& qwen = test::real_tokenizer("qwen3");
  const Ids ids = qwen.encode("<|im_start|>user\nhi<|im_end|>", false);
  StreamDecoder stream(qwen);
  std::string text;
  for (int32_t id : ids) text += stream.push(id);
  EXPECT_EQ(text + stream.flush(), "user\nhi");
}

// Any id sequence, including byte pieces in random order and special tokens: the stream equals
// decode() and every chunk is valid UTF-8.
TEST(StreamDecoder, MatchesDecodeOnRandomIds) {
  std::mt19937 rng(1234);
  for (const char* name : {"llama3", "qwen3", "gemma3"}) {
    SCOPED_TRACE(name);
    const Tokenizer& tok = test::real_tokenizer(name);
    // Bias towards the ids that make partial characters: low ids (bytes) and special ones.
    std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(tok.vocab_size() + 5));
    std::uniform_int_distribution<int32_t> low(0, 300);
    std::uniform_int_distribution<int> len(1, 24), coin(0, 2);
    for (int round = 0; round < 300; ++round) {
      Ids ids(len(rng));
      for (auto& id : ids) id = coin(rng) == 0 ? any(rng) : low(rng);
      for (bool skip : {false, true}) {
        const auto chunks = stream_chunks(tok, ids, skip);
        for (const auto& c : chunks) ASSERT_EQ(utf8::first_invalid(c), std::string::npos);
        ASSERT_EQ(joined(chunks), tok.decode(ids, skip));
      }
    }
  }
}

}  // namespace
}  // namespace luminal
