// Pipeline parts the real tokenizers do not use, on tiny tokenizer.json files
// (tests/data/tokenizers/synthetic, made by make_synthetic.py). Expected ids and texts are what
// Hugging Face `tokenizers` 0.23 gives for the same files.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace luminal {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer synthetic(const std::string& name) {
  return Tokenizer::from_json_file(test::tokenizer_data_dir() + "/synthetic/" + name);
}

struct Expect {
  std::string text;
  Ids ids, ids_with_special;
  std::string decoded;               // decode(ids, skip_special_tokens = false)
  std::string decoded_skip_special;  // decode(ids_with_special, skip_special_tokens = true)
};

void check(const Tokenizer& tok, const std::vector<Expect>& cases) {
  for (const Expect& e : cases) {
    SCOPED_TRACE("text: \"" + e.text + "\"");
    EXPECT_EQ(tok.encode(e.text, false), e.ids);
    EXPECT_EQ(tok.encode(e.text, true), e.ids_with_special);
    EXPECT_EQ(tok.decode(e.ids, false), e.decoded);
    EXPECT_EQ(tok.decode(e.ids_with_special, true), e.decoded_skip_special);
  }
}

// Prepend + Replace normalizer, Strip after Fuse, byte fallback, fused unk, and added tokens
// with lstrip/rstrip, single_word and normalized matching.
TEST(SyntheticPipeline, SentencePieceStyle) {
  const Tokenizer tok = synthetic("sentencepiece_bpe.json");
  check(tok, {
                 {"hello world", {24, 31}, {1, 24, 31}, "hello world", "hello world"},
                 {"hello  world \xE2\x82\xAC", {24, 6, 31, 6, 3, 4, 5}, {1, 24, 6, 31, 6, 3, 4, 5},
                  "hello  world \xE2\x82\xAC", "hello  world \xE2\x82\xAC"},
                 // Two unknown characters (no byte tokens for them) fuse into one <unk>.
                 {"hello \xC2\xA5\xC2\xA5 world", {24, 6, 0, 31}, {1, 24, 6, 0, 31}, "hello <unk> world",
                  "hello  world"},
                 // [MASK] swallows the spaces around it; "wow" matches in its normalized form "▁wow";
                 // "ab" is single_word so only the free-standing one is the added token.
                 {"x [MASK]  wow ab", {6, 16, 34, 35, 6, 32}, {1, 6, 16, 34, 35, 6, 32}, "x[MASK] wow ab",
                  "x wow ab"},
                 {"ab abx xab", {32, 6, 6, 32, 16, 6, 16, 32}, {1, 32, 6, 6, 32, 16, 6, 16, 32}, "ab  abx xab",
                  "ab  abx xab"},
                 // Strip removes one leading space of the whole text only, not after <s>.
                 {"<s>hello</s>", {1, 24, 2}, {1, 1, 24, 2}, "<s> hello</s>", "hello"},
                 {"wow", {35}, {1, 35}, "wow", "wow"},
                 {"\xE2\x82\xAC", {6, 3, 4, 5}, {1, 6, 3, 4, 5}, "\xE2\x82\xAC", "\xE2\x82\xAC"},
                 {"", {}, {1}, "", ""},
             });
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.is_special(34));   // [MASK]
  EXPECT_FALSE(tok.is_special(35));  // wow
  EXPECT_EQ(tok.vocab_size(), 36);
}

// Split with every behavior (MergedWithNext, Contiguous, Removed, MergedWithPrevious), ByteLevel
// with add_prefix_space and its regex, ignore_merges, merges given as pairs, and a post-processor
// Sequence whose template appends EOS.
TEST(SyntheticPipeline, ByteLevelSplits) {
  const Tokenizer tok = synthetic("byte_level_splits.json");
  check(tok, {
                 {"hello world", {260, 264}, {260, 264, 265}, " hello world", " hello world"},
                 {"hello-x-world 12345 a.b.c",
                  {260, 32, 45, 120, 32, 45, 119, 111, 114, 108, 100, 32, 32, 261, 51, 52, 53, 32, 97, 46, 32, 98, 46, 32, 99},
                  {260, 32, 45, 120, 32, 45, 119, 111, 114, 108, 100, 32, 32, 261, 51, 52, 53, 32, 97, 46, 32, 98, 46, 32, 99, 265},
                  " hello -x -world  12345 a. b. c", " hello -x -world  12345 a. b. c"},
                 {"a|b||c", {32, 97, 32, 98, 32, 99}, {32, 97, 32, 98, 32, 99, 265}, " a b c", " a b c"},
                 {"  hello", {32, 260}, {32, 260, 265}, "  hello", "  hello"},
                 // "Ġworld" is a token no merge reaches: only ignore_merges finds it.
                 {"world", {264}, {264, 265}, " world", " world"},
             });
  EXPECT_EQ(tok.bos_id(), std::nullopt);
}

// Without a decoder, tokens are joined with spaces.
TEST(SyntheticPipeline, NoDecoderJoinsTokensWithSpaces) {
  const Tokenizer tok = synthetic("no_decoder.json");
  EXPECT_EQ(tok.decode({260, 264}, false), "\xC4\xA0hello \xC4\xA0world");
}

}  // namespace
}  // namespace luminal
