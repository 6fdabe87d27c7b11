// The Unicode helpers under the tokenizer: lossy UTF-8 (Rust's from_utf8_lossy, i.e. one U+FFFD
// per maximal invalid subpart), NFC, and GPT-2's byte alphabet.
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string lossy(const std::string& bytes, bool hold, size_t* used = nullptr) {
  std::string out;
  const size_t n = utf8::append_lossy(out, bytes, hold);
  if (used) *used = n;
  return out;
}

TEST(Utf8, LossyReplacesMaximalInvalidSubparts) {
  EXPECT_EQ(lossy("caf\xC3\xA9 \xF0\x9F\x9A\x80", false), "caf\xC3\xA9 \xF0\x9F\x9A\x80");
  EXPECT_EQ(lossy("\xE2\x82" "a", false), kFffd + "a");             // a cut-short character: one
  EXPECT_EQ(lossy("\xED\xA0\x80", false), kFffd + kFffd + kFffd);   // a surrogate: one per byte
  EXPECT_EQ(lossy("\xC0\x80", false), kFffd + kFffd);               // overlong
  EXPECT_EQ(lossy("\xF4\x90\x80\x80", false), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(lossy("\xFF" "b", false), kFffd + "b");
  EXPECT_EQ(lossy("\x80\x80", false), kFffd + kFffd);
}

TEST(Utf8, LossyHoldsAnIncompleteTail) {
  size_t used = 0;
  EXPECT_EQ(lossy("a\xF0\x9F\x9A", true, &used), "a");
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(lossy("a\xF0\x9F\x9A", false, &used), "a" + kFffd);
  EXPECT_EQ(used, 4u);
  EXPECT_EQ(lossy("a\xF0\x41", true, &used), "a" + kFffd + "A");  // already invalid: not held
}

TEST(Utf8, FirstInvalid) {
  EXPECT_EQ(utf8::first_invalid("ok \xE4\xB8\xAD"), std::string::npos);
  EXPECT_EQ(utf8::first_invalid("ok \xE4\xB8"), 3u);
}

// Expected values from Python's unicodedata.normalize("NFC", ...).
TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(to_nfc("cafe\xCC\x81"), "caf\xC3\xA9");                    // e + acute -> é
  EXPECT_EQ(to_nfc("\xE2\x84\xAB"), "\xC3\x85");                       // Angstrom sign -> Å
  EXPECT_EQ(to_nfc("A\xCC\x8A\xCC\x81"), "\xC7\xBA");                  // A + ring + acute -> Ǻ
  EXPECT_EQ(to_nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");              // marks reordered -> ậ
  EXPECT_EQ(to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul jamo -> 각
  EXPECT_EQ(to_nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");       // excluded from composition
  EXPECT_EQ(to_nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");                   // ﬁ is only compatibility
  EXPECT_EQ(to_nfc("plain ASCII"), "plain ASCII");
}

TEST(ByteLevel, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string mapped = byte_level::encode(all);
  std::string back;
  ASSERT_TRUE(byte_level::decode(mapped, back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(byte_level::encode(" \n!"), "\xC4\xA0\xC4\x8A!");  // Ġ Ċ !
  std::string out;
  EXPECT_FALSE(byte_level::decode("\xE4\xB8\xAD", out));  // 中 is outside the alphabet
}

}  // namespace
}  // namespace luminal
