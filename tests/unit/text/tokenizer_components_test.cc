// Pre-tokenizers, normalizers, decoders and Unicode helpers of the tokenizer, one by one.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "base/json.h"
#include "text/internal/decoder.h"
#include "text/internal/normalizer.h"
#include "text/internal/pre_tokenizer.h"
#include "text/internal/regex.h"
#include "text/internal/unicode.h"
#include "text/internal/unicode_tables.h"

namespace switchyard::text::internal {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> PreTokenize(const std::string& json, const std::string& text) {
  auto doc = base::JsonDocument::Parse(json, "test");
  EXPECT_TRUE(doc.ok()) << doc.status();
  auto pre = ParsePreTokenizer((*doc)->root(), base::JsonPath{"test", "pre"}, false);
  EXPECT_TRUE(pre.ok()) << pre.status();
  if (!pre.ok())
    return {};
  std::vector<Piece> pieces = {Piece{text, true}};
  EXPECT_TRUE((*pre)->Apply(&pieces).ok());
  std::vector<std::string> out;
  for (const Piece& p : pieces)
    out.push_back(p.text);
  return out;
}

std::string Split(const std::string& behavior, bool invert = false) {
  return R"({"type": "Split", "pattern": {"String": " "}, "behavior": ")" + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

TEST(PreTokenizerTest, SplitBehaviors) {
  EXPECT_THAT(PreTokenize(Split("Removed"), "a  b "), ElementsAre("a", "b"));
  EXPECT_THAT(PreTokenize(Split("Isolated"), "a  b"), ElementsAre("a", " ", " ", "b"));
  EXPECT_THAT(PreTokenize(Split("MergedWithPrevious"), "a  b "), ElementsAre("a ", " ", "b "));
  EXPECT_THAT(PreTokenize(Split("MergedWithNext"), " a  b"), ElementsAre(" a", " ", " b"));
  EXPECT_THAT(PreTokenize(Split("Contiguous"), "a  b  "), ElementsAre("a", "  ", "b", "  "));
  EXPECT_THAT(PreTokenize(Split("Removed", true), "a  b"), ElementsAre(" ", " "));
}

TEST(PreTokenizerTest, SplitRegex) {
  std::string json =
      R"({"type": "Split", "pattern": {"Regex": "\\p{N}+"}, "behavior": "Isolated"})";
  EXPECT_THAT(PreTokenize(json, "ab12c٣٤"), ElementsAre("ab", "12", "c", "٣٤"));
}

TEST(PreTokenizerTest, ByteLevel) {
  std::string json = R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})";
  EXPECT_THAT(PreTokenize(json, "Hello world's  x"),
              ElementsAre("ĠHello", "Ġworld", "'s", "Ġ", "Ġx"));
  std::string no_regex = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})";
  EXPECT_THAT(PreTokenize(no_regex, "a b\n"), ElementsAre("aĠbĊ"));
}

TEST(PreTokenizerTest, Metaspace) {
  std::string first =
      R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})";
  EXPECT_THAT(PreTokenize(first, "hello big world"), ElementsAre("▁hello", "▁big", "▁world"));
  std::string never =
      R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": false})";
  EXPECT_THAT(PreTokenize(never, "a b"), ElementsAre("a▁b"));
  // "first" prepends only to the piece at the start of the input.
  std::string seq =
      R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},)" + first + "]}";
  EXPECT_THAT(PreTokenize(seq, "a b"), ElementsAre("▁a", "b"));
}

TEST(PreTokenizerTest, DigitsPunctuationWhitespace) {
  EXPECT_THAT(PreTokenize(R"({"type": "Digits", "individual_digits": true})", "a123"),
              ElementsAre("a", "1", "2", "3"));
  EXPECT_THAT(PreTokenize(R"({"type": "Digits", "individual_digits": false})", "a123b4"),
              ElementsAre("a", "123", "b", "4"));
  EXPECT_THAT(PreTokenize(R"({"type": "Punctuation"})", "hi, you!?"),
              ElementsAre("hi", ",", " you", "!", "?"));
  EXPECT_THAT(PreTokenize(R"({"type": "Whitespace"})", "héllo, wörld!! 3"),
              ElementsAre("héllo", ",", "wörld", "!!", "3"));
  EXPECT_THAT(PreTokenize(R"({"type": "WhitespaceSplit"})", " a\tb\u3000c "),
              ElementsAre("a", "b", "c"));
}

// Encode cuts the text with Cut when a pre-tokenizer only cuts; the words must be those
// Apply makes.
TEST(PreTokenizerTest, CutGivesTheWordsOfApply) {
  const std::vector<std::string> cutting = {
      Split("Removed"),
      Split("Isolated"),
      Split("MergedWithPrevious"),
      Split("MergedWithNext"),
      Split("Contiguous"),
      Split("Removed", true),
      Split("Contiguous", true),
      R"({"type": "Split", "pattern": {"Regex": "\\p{N}+"}, "behavior": "MergedWithNext"})",
      R"({"type": "Digits", "individual_digits": true})",
      R"({"type": "Digits", "individual_digits": false})",
      R"({"type": "Punctuation"})",
      R"({"type": "Whitespace"})",
      R"({"type": "WhitespaceSplit"})",
      R"({"type": "BertPreTokenizer"})",
      R"({"type": "CharDelimiterSplit", "delimiter": "é"})",
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})",
      R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})",
  };
  const std::vector<std::string> texts = {
      "", " ", "a", "  a  b  ", "Hello world's  x, 1234 é!\n\n  yé 42é", "é  é", "12 34,56"};
  for (const std::string& json : cutting) {
    auto doc = base::JsonDocument::Parse(json, "test");
    ASSERT_TRUE(doc.ok()) << doc.status();
    auto pre = ParsePreTokenizer((*doc)->root(), base::JsonPath{"test", "pre"}, true);
    ASSERT_TRUE(pre.ok()) << pre.status();
    ASSERT_TRUE((*pre)->OnlyCuts()) << json;
    for (const std::string& text : texts) {
      std::vector<Piece> pieces = {Piece{text, true}};
      ASSERT_TRUE((*pre)->Apply(&pieces).ok());
      std::vector<std::string> applied;
      for (const Piece& p : pieces)
        applied.push_back(p.text);
      ByteRanges ranges;
      if (!text.empty())
        ranges.emplace_back(0, text.size());
      ASSERT_TRUE((*pre)->Cut(text, &ranges).ok());
      std::vector<std::string> cut;
      for (auto [begin, end] : ranges)
        cut.push_back(text.substr(begin, end - begin));
      EXPECT_EQ(cut, applied) << json << " on \"" << text << "\"";
    }
  }
}

TEST(PreTokenizerTest, TextChangingStepsDoNotOnlyCut) {
  for (const char* json : {
           R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
           R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"})",
           R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
               {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}]})",
       }) {
    auto doc = base::JsonDocument::Parse(json, "test");
    ASSERT_TRUE(doc.ok()) << doc.status();
    auto pre = ParsePreTokenizer((*doc)->root(), base::JsonPath{"test", "pre"}, true);
    ASSERT_TRUE(pre.ok()) << pre.status();
    EXPECT_FALSE((*pre)->OnlyCuts()) << json;
  }
  // Without the deferral a ByteLevel step maps bytes to characters.
  auto doc = base::JsonDocument::Parse(
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})", "test");
  auto pre = ParsePreTokenizer((*doc)->root(), base::JsonPath{"test", "pre"}, false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_FALSE((*pre)->OnlyCuts());
}

std::string Normalize(const std::string& json, const std::string& text) {
  auto doc = base::JsonDocument::Parse(json, "test");
  auto n = ParseNormalizer((*doc)->root(), base::JsonPath{"test", "normalizer"});
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? (*n)->Normalize(text) : "";
}

TEST(NormalizerTest, Basics) {
  EXPECT_EQ(Normalize(R"({"type": "NFC"})", "e\u0301 \u1100\u1161\u11a8 \u212b"),
            "\u00e9 \uac01 \u00c5");
  EXPECT_EQ(Normalize(R"({"type": "NFKC"})", "ﬁ ① ｆ"), "fi 1 f");
  EXPECT_EQ(Normalize(R"({"type": "NFD"})", "\u00e9"), "e\u0301");
  EXPECT_EQ(Normalize(R"({"type": "Lowercase"})", "HeLLo ÀΣİ"), "hello àσi\u0307");
  EXPECT_EQ(
      Normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})", " \u3000 a b \n"),
      "a b");
  EXPECT_EQ(Normalize(R"({"type": "Prepend", "prepend": "▁"})", "x"), "▁x");
  EXPECT_EQ(Normalize(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  EXPECT_EQ(
      Normalize(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})", "a b c"),
      "a▁b▁c");
  EXPECT_EQ(Normalize(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})",
                      "a   b  c"),
            "a b c");
}

std::string DecodeWith(const std::string& json, std::vector<std::string> tokens) {
  auto doc = base::JsonDocument::Parse(json, "test");
  auto d = ParseDecoder((*doc)->root(), base::JsonPath{"test", "decoder"});
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok())
    return "";
  (*d)->DecodeChain(&tokens);
  std::string out;
  for (const auto& t : tokens)
    out += t;
  return out;
}

TEST(DecoderTest, Decoders) {
  EXPECT_EQ(DecodeWith(R"({"type": "ByteLevel"})", {"Hello", "Ġw", "Ã©"}), "Hello wé");
  EXPECT_EQ(DecodeWith(R"({"type": "ByteLevel"})", {"Ã"}), "\xEF\xBF\xBD");
  EXPECT_EQ(DecodeWith(R"({"type": "ByteFallback"})", {"a", "<0xC3>", "<0xA9>", "<0xFF>", "b"}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(DecodeWith(R"({"type": "ByteFallback"})", {"<0xC3>", "<0xA9>"}), "é");
  EXPECT_EQ(
      DecodeWith(R"({"type": "Strip", "content": " ", "start": 1, "stop": 0})", {"  a", " b"}),
      " ab");
  EXPECT_EQ(DecodeWith(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})",
                       {"▁a▁b", "▁c"}),
            "ab c");
  EXPECT_EQ(DecodeWith(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"})",
                       {"▁a", "▁b"}),
            " a b");
  EXPECT_EQ(DecodeWith(R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern":
                            {"String": "▁"}, "content": " "}, {"type": "Fuse"}]})",
                       {"▁a", "▁b"}),
            " a b");
}

TEST(UnicodeTest, Classes) {
  EXPECT_TRUE(IsLetter('a'));
  EXPECT_TRUE(IsLetter(0x4E2D));
  EXPECT_FALSE(IsLetter('1'));
  EXPECT_TRUE(IsNumber(0x0663));
  EXPECT_TRUE(IsWhitespace(0x85));
  EXPECT_FALSE(IsWhitespace(0x1C));
  EXPECT_TRUE(IsPunctuation('$'));
  EXPECT_TRUE(IsPunctuation(0x3002));
}

TEST(RegexTest, WhitespaceMatchesOniguruma) {
  // Oniguruma's \s is White_Space: U+0085 yes, U+001C no.
  auto re = Regex::Compile("\\s+|[^\\s]+");
  ASSERT_TRUE(re.ok());
  ByteRanges m;
  ASSERT_TRUE((*re)->FindAll("a\xC2\x85\x1c", &m).ok());
  EXPECT_THAT(m, ElementsAre(std::pair<size_t, size_t>{0, 1}, std::pair<size_t, size_t>{1, 3},
                             std::pair<size_t, size_t>{3, 4}));
  EXPECT_EQ(RewriteUnicodeClasses("[]\\s]"), "[]" + RewriteUnicodeClasses("\\s").substr(1));
}

// Unicode 15.0-16.0 assignments, as HF `tokenizers` classifies them (issue 18): U+1C89
// CYRILLIC CAPITAL LETTER TJE (Lu), U+31350 a CJK ideograph (Lo), U+1CCF0 OUTLINED DIGIT
// ZERO (Nd), U+1F8B5 and U+1FA89 symbols (So).
TEST(UnicodeTest, CategoriesAreUnicode16) {
  EXPECT_TRUE(IsLetter(0x1C89));
  EXPECT_TRUE(IsLetter(0x31350));
  EXPECT_TRUE(IsNumber(0x1CCF0));
  EXPECT_EQ(CategoryFlags(0x1CCF0), kCatNumber | kCatDecimal);
  EXPECT_EQ(CategoryFlags(0x1F8B5), kCatSymbol);
  EXPECT_EQ(CategoryFlags(0x1FA89), kCatSymbol);
  EXPECT_EQ(CategoryFlags(0x1C8B), 0);  // still unassigned
}

// PCRE2 10.42 matches \p{..} against Unicode 14.0; the rewrite adds what 15.0-16.0 assigned.
TEST(RegexTest, PropertyClassesAreUnicode16) {
  const std::string tje = "\xE1\xB2\x89";            // U+1C89 (Lu)
  const std::string outlined0 = "\xF0\x9C\xB3\xB0";  // U+1CCF0 (Nd)
  auto spans = [](std::string_view pattern, std::string_view s) {
    auto re = Regex::Compile(pattern, Regex::Engine::kPcre2);
    EXPECT_TRUE(re.ok()) << re.status();
    ByteRanges m;
    if (re.ok()) {
      EXPECT_TRUE((*re)->FindAll(s, &m).ok());
    }
    return m;
  };
  using Span = std::pair<size_t, size_t>;
  EXPECT_THAT(spans("\\p{L}+", "a" + tje + "b"), ElementsAre(Span{0, 5}));
  EXPECT_THAT(spans("\\pL+", "a" + tje), ElementsAre(Span{0, 4}));
  EXPECT_THAT(spans("\\p{Lu}", tje), ElementsAre(Span{0, 3}));
  EXPECT_THAT(spans("\\p{Ll}", tje), ElementsAre());
  EXPECT_THAT(spans("\\P{L}", tje), ElementsAre());
  EXPECT_THAT(spans("\\p{^L}", tje), ElementsAre());
  EXPECT_THAT(spans("[^\\r\\n\\p{L}\\p{P}]+", tje + "."), ElementsAre());
  EXPECT_THAT(spans("\\p{N}{1,3}", outlined0 + outlined0), ElementsAre(Span{0, 8}));
  EXPECT_THAT(spans("[\\p{Nd}]", outlined0), ElementsAre(Span{0, 4}));
  // Names without 15.0-16.0 additions and scripts stay as written.
  EXPECT_EQ(RewriteUnicodeClasses("\\p{Han}\\p{Zs}"), "\\p{Han}\\p{Zs}");
  EXPECT_EQ(RewriteUnicodeClasses("[\\P{L}]"), "[\\P{L}]");
  EXPECT_EQ(RewriteUnicodeClasses("a\\p{Lu"), "a\\p{Lu");
}

TEST(RegexTest, EmptyMatchesAdvance) {
  auto re = Regex::Compile("x*");
  ASSERT_TRUE(re.ok());
  ByteRanges m;
  ASSERT_TRUE((*re)->FindAll("axé", &m).ok());
  EXPECT_THAT(m, ElementsAre(std::pair<size_t, size_t>{0, 0}, std::pair<size_t, size_t>{1, 2},
                             std::pair<size_t, size_t>{2, 2}, std::pair<size_t, size_t>{4, 4}));
}

}  // namespace
}  // namespace switchyard::text::internal
