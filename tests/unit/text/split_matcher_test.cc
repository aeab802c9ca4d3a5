// The hand-written split matchers must find exactly PCRE2's matches for their patterns.
#include "text/internal/split_matcher.h"

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "base/utf8.h"
#include "text/internal/byte_level.h"
#include "text/internal/regex.h"

namespace switchyard::text::internal {
namespace {

using Ranges = ByteRanges;

struct Engines {
  std::unique_ptr<Regex> fast;
  std::unique_ptr<Regex> pcre2;
};

Engines Compile(std::string_view pattern) {
  auto fast = Regex::Compile(pattern);
  auto pcre2 = Regex::Compile(pattern, Regex::Engine::kPcre2);
  EXPECT_TRUE(fast.ok() && pcre2.ok());
  return Engines{std::move(*fast), std::move(*pcre2)};
}

// Empty when both engines agree, else a description of the first difference.
std::string Compare(const Engines& e, const std::string& text) {
  Ranges fast, pcre2;
  EXPECT_TRUE(e.fast->FindAll(text, &fast).ok());
  EXPECT_TRUE(e.pcre2->FindAll(text, &pcre2).ok());
  if (fast == pcre2)
    return "";
  size_t i = 0;
  while (i < fast.size() && i < pcre2.size() && fast[i] == pcre2[i])
    ++i;
  auto show = [&](const Ranges& r) {
    if (i >= r.size())
      return std::string("<none>");
    return "[" + std::to_string(r[i].first) + "," + std::to_string(r[i].second) + ")";
  };
  return "match " + std::to_string(i) + ": fast " + show(fast) + " pcre2 " + show(pcre2) +
         " at byte " + std::to_string(i < pcre2.size() ? pcre2[i].first : text.size());
}

constexpr std::string_view kPatterns[] = {kGpt2Pattern, kLlama3Pattern, kQwen2Pattern};

TEST(SplitMatcherTest, RecognizesOnlyExactPatterns) {
  EXPECT_EQ(RecognizeSplitPattern(kGpt2Pattern), KnownSplitPattern::kGpt2);
  EXPECT_EQ(RecognizeSplitPattern(kLlama3Pattern), KnownSplitPattern::kLlama3);
  EXPECT_EQ(RecognizeSplitPattern(kQwen2Pattern), KnownSplitPattern::kQwen2);
  EXPECT_EQ(RecognizeSplitPattern(std::string(kLlama3Pattern) + "|x"), std::nullopt);
  EXPECT_EQ(RecognizeSplitPattern("\\p{N}{1,3}"), std::nullopt);
}

// Every code point (all planes up to U+2FFFF, plus tags and variation selectors) in contexts
// that exercise each alternative: contractions, optional prefixes, digit runs, whitespace.
TEST(SplitMatcherTest, AgreesWithPcre2OnEveryCodePoint) {
  for (std::string_view pattern : kPatterns) {
    Engines engines = Compile(pattern);
    std::string text;
    auto flush = [&] {
      std::string diff = Compare(engines, text);
      EXPECT_EQ(diff, "") << "pattern " << pattern;
      text.clear();
      return diff.empty();
    };
    for (uint32_t cp = 0; cp <= 0xE01EF; ++cp) {
      if (cp == 0x30000)
        cp = 0xE0000;
      if (cp >= 0xD800 && cp <= 0xDFFF)
        continue;
      std::string x;
      base::AppendUtf8(cp, &x);
      text += x + "'" + x + " " + x + "a\t" + x + x + "1234 " + x + "\n'" + x + "  " + x + "\r\n";
      if ((cp & 0xFF) == 0xFF && !flush())
        break;
    }
    flush();
  }
}

TEST(SplitMatcherTest, AgreesWithPcre2OnRandomText) {
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             "s",
                                             "S",
                                             "t",
                                             "re",
                                             "RE",
                                             "ve",
                                             "m",
                                             "ll",
                                             "LL",
                                             "d",
                                             "D",
                                             "'",
                                             "'",
                                             "\"",
                                             " ",
                                             " ",
                                             " ",
                                             "  ",
                                             "\t",
                                             "\n",
                                             "\r",
                                             "\r\n",
                                             "\x0B",
                                             "\x0C",
                                             "0",
                                             "7",
                                             "123",
                                             ".",
                                             ",",
                                             "!",
                                             "-",
                                             "_",
                                             "/",
                                             "\xC2\x85",
                                             "\xC2\xA0",
                                             "\xE3\x80\x80",
                                             "\xE2\x80\xA8",
                                             "\xE2\x80\x8B",
                                             "\xC5\xBF",
                                             "\xE2\x84\xAA",
                                             "\xC3\xA9",
                                             "e\xCC\x81",
                                             "\xCC\x81",
                                             "\xC2\xB2",
                                             "\xE2\x85\xAB",
                                             "\xD9\xA3",
                                             "\xE4\xB8\xAD",
                                             "\xED\x95\x9C",
                                             "\xF0\x9F\x98\x80",
                                             "\xF0\x9D\x90\x80",
                                             "\xE2\x82\xAC",
                                             "\xEF\xBC\x91",
                                             "\xD0\x96",
                                             "\xCE\xA3",
                                             "\xE0\xA4\x95",
                                             "\xE0\xA5\x8D"};
  std::mt19937 rng(12345);
  for (std::string_view pattern : kPatterns) {
    Engines engines = Compile(pattern);
    for (int i = 0; i < 20000; ++i) {
      std::string text;
      int length = static_cast<int>(rng() % 24);
      for (int j = 0; j < length; ++j)
        text += alphabet[rng() % alphabet.size()];
      std::string diff = Compare(engines, text);
      ASSERT_EQ(diff, "") << "pattern " << pattern << " text " << text;
    }
  }
}

}  // namespace
}  // namespace switchyard::text::internal
