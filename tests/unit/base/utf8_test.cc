#include "base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

TEST(Utf8Test, DecodesValidSequences) {
  EXPECT_EQ(DecodeUtf8("A").code_point, 0x41u);
  const Utf8Decoded euro = DecodeUtf8("\xE2\x82\xAC");
  EXPECT_TRUE(euro.valid);
  EXPECT_EQ(euro.code_point, 0x20ACu);
  EXPECT_EQ(euro.length, 3u);
  const Utf8Decoded emoji = DecodeUtf8("\xF0\x9F\x98\x80");
  EXPECT_EQ(emoji.code_point, 0x1F600u);
  EXPECT_EQ(emoji.length, 4u);
}

TEST(Utf8Test, RejectsOverlongSurrogateAndOutOfRange) {
  EXPECT_FALSE(DecodeUtf8("\xC0\xAF").valid);          // overlong '/'
  EXPECT_FALSE(DecodeUtf8("\xED\xA0\x80").valid);      // surrogate U+D800
  EXPECT_FALSE(DecodeUtf8("\xF4\x90\x80\x80").valid);  // above U+10FFFF
  EXPECT_FALSE(DecodeUtf8("\x80").valid);              // lone continuation
}

TEST(Utf8Test, MaximalSubpartLengths) {
  // Python: b"\xe2\x82A".decode(errors="replace") == "\ufffdA" (one replacement).
  EXPECT_EQ(DecodeUtf8("\xE2\x82"
                       "A")
                .length,
            2u);
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"
                         "A"),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Utf8Test, EncodeRoundTrips) {
  for (uint32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    const Utf8Decoded d = DecodeUtf8(s);
    EXPECT_TRUE(d.valid);
    EXPECT_EQ(d.code_point, cp);
    EXPECT_EQ(d.length, s.size());
    EXPECT_TRUE(IsValidUtf8(s));
  }
}

// ASCII is checked 8 bytes at a time: a bad byte anywhere, in a word or in the tail, is
// still found.
TEST(Utf8Test, ValidityAtEveryPositionOfLongText) {
  const std::string ascii(37, 'a');
  EXPECT_TRUE(IsValidUtf8(ascii));
  for (size_t at = 0; at < ascii.size(); ++at) {
    std::string bad = ascii;
    bad[at] = '\xFF';
    EXPECT_FALSE(IsValidUtf8(bad)) << at;
    std::string good = ascii;
    good.replace(at, 1, "\xE2\x82\xAC");  // a valid 3-byte character
    EXPECT_TRUE(IsValidUtf8(good)) << at;
    std::string cut = ascii.substr(0, at) + "\xE2\x82";  // cut short at the end
    EXPECT_FALSE(IsValidUtf8(cut)) << at;
  }
}

}  // namespace
}  // namespace switchyard::base
