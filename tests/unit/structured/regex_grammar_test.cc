// The regex compiler: which texts each pattern accepts (byte by byte, through the real
// matcher), UTF-8 correctness of classes and `.`, and the constructs and limits it refuses.
#include "structured/regex_grammar.h"

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "base/utf8.h"
#include "grammar_test_util.h"
#include "structured/char_class.h"
#include "structured/ebnf.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> MustCompile(const std::string& pattern) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileRegex(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status();
  return g.ok() ? *g : nullptr;
}

std::string Utf8(uint32_t cp) {
  std::string s;
  base::AppendUtf8(cp, &s);
  return s;
}

struct Case {
  std::string pattern;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

// Failures print the pattern, not the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.pattern;
}

class RegexCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(RegexCaseTest, AcceptsExactlyTheValidTexts) {
  const Case& c = GetParam();
  std::shared_ptr<const Grammar> g = MustCompile(c.pattern);
  ASSERT_NE(g, nullptr);
  for (const std::string& text : c.valid)
    EXPECT_TRUE(FullMatch(g, text)) << c.pattern << " should accept '" << text << "'";
  for (const std::string& text : c.invalid)
    EXPECT_FALSE(FullMatch(g, text)) << c.pattern << " should reject '" << text << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, RegexCaseTest,
    ::testing::Values(
        Case{R"(\d{3}-\d{4})", {"555-1234"}, {"55-1234", "5555-1234", "abc-defg", "555-123"}},
        Case{R"([A-Z][a-z]+ [A-Z][a-z]+)", {"Ada Lovelace"}, {"ada Lovelace", "Ada  Lovelace"}},
        Case{R"((?P<year>\d{4})-(?:0[1-9]|1[0-2])-(?<day>\d\d))",
             {"2024-01-31", "1999-12-01"},
             {"2024-13-01", "2024-00-01", "24-01-01"}},
        Case{"^(yes|no)$", {"yes", "no"}, {"", "yesno", "yes$", "^no"}},
        Case{"^a$|^b$", {"a", "b"}, {"ab", ""}},
        Case{"a.c",
             {"abc", "a c",
              "a\xE2\x82\xAC"
              "c",
              "a\xF0\x9F\x98\x80"
              "c"},
             {"ac", "a\nc",
              "a\xE2\x82"
              "c",
              "abbc"}},
        Case{"[^a-z]", {"A", "\xC3\xA9", "\xF0\x9F\x98\x80", "\n"}, {"b", "", "AB", "\xC3"}},
        Case{"[\xC3\xA9-\xC3\xBC]+",  // [é-ü]
             {"\xC3\xA9", "\xC3\xBC\xC3\xB1"},
             {"e", "\xC3\xBF", "\xC3\xA8"}},
        Case{R"([\u4e00-\u9fff]{2})", {"\xE4\xB8\xAD\xE6\x96\x87"}, {"\xE4\xB8\xAD", "ab"}},
        Case{R"(\x41\u00e9\U0001F600)", {"A\xC3\xA9\xF0\x9F\x98\x80"}, {"A"}},
        Case{R"([\d\s]+)", {"1 2\t3\n"}, {"1a", ""}},
        Case{R"(\w+\W)", {"ab_9!", "x\xC3\xA9"}, {"ab", "a b c"}},
        Case{R"(\D\S)", {"aa", "\xC3\xA9x"}, {"1a", "a "}},
        Case{"a{2,}?b", {"aab", "aaaab"}, {"ab", "b"}}, Case{"a{,2}", {"", "a", "aa"}, {"aaa"}},
        Case{"a{2}b{1,3}", {"aab", "aabbb"}, {"ab", "aabbbb"}}, Case{"x{", {"x{"}, {"x"}},
        Case{"a{}", {"a{}"}, {"a"}}, Case{"a{1,b}", {"a{1,b}"}, {"a"}},
        Case{"(a|b|)c", {"c", "ac", "bc"}, {"abc", ""}}, Case{R"(\.\*\\\(\[)", {".*\\(["}, {"a"}},
        Case{"[]a]+", {"]", "a]a"}, {"b"}}, Case{"[^]a]", {"b"}, {"]", "a"}},
        Case{"[a-]", {"a", "-"}, {"b"}}, Case{R"([\]\-\\])", {"]", "-", "\\"}, {"a"}},
        Case{"(?#a comment)abc", {"abc"}, {"a comment"}}, Case{"", {""}, {"a"}},
        Case{"(?:)", {""}, {" "}}, Case{"a{0}", {""}, {"a"}},
        Case{R"(\n\t\r\f\v\a\0\101)", {std::string("\n\t\r\f\v\a\0A", 8)}, {"n"}},
        Case{R"([\b])", {"\b"}, {"b"}}, Case{"(a*)*b", {"b", "aab"}, {"a"}},
        Case{"(a|ab)(c|bcd)(d*)", {"abcd", "acd", "abbcdd"}, {"abc d"}},
        Case{R"((\d+\.)?\d+)", {"1.5", "15", "0.25"}, {".5", "1.", "1..5"}},
        Case{"\xC3\xA9t\xC3\xA9", {"\xC3\xA9t\xC3\xA9"}, {"ete"}},
        Case{
            R"([\x7f-\u0800])", {"\x7f", Utf8(0x80), Utf8(0x7FF), Utf8(0x800)}, {"~", Utf8(0x801)}},
        Case{R"([\U00010000-\U0010FFFF])",
             {Utf8(0x10000), Utf8(0x10FFFF), "\xF0\x9F\x98\x80"},
             {Utf8(0xFFFF), "\xF4\x90\x80\x80"}},
        Case{R"([^\x00-\x7f])",
             {Utf8(0x80), Utf8(0xD7FF), Utf8(0xE000)},
             {"a", "\xED\xA0\x80", "\xC0\xAF", "\xF4\x90\x80\x80", "\xC2"}}));

// Every string of one or two bytes, and random longer ones: `.` accepts exactly the valid
// UTF-8 encodings of one code point other than newline.
TEST(RegexGrammarTest, DotIsExactlyOneUtf8CodePoint) {
  std::shared_ptr<const Grammar> g = MustCompile(".");
  ASSERT_NE(g, nullptr);
  const auto expected = [](const std::string& s) {
    const base::Utf8Decoded d = base::DecodeUtf8(s);
    return d.valid && d.length == s.size() && d.code_point != '\n';
  };
  for (int a = 0; a < 256; ++a) {
    const std::string one(1, static_cast<char>(a));
    EXPECT_EQ(FullMatch(g, one), expected(one)) << a;
    for (int b = 0; b < 256; ++b) {
      const std::string two = one + static_cast<char>(b);
      ASSERT_EQ(FullMatch(g, two), expected(two)) << a << " " << b;
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = 3 + static_cast<int>(rng() % 2);
    s.push_back(static_cast<char>(0xE0 + rng() % 0x15));  // a multi-byte lead, or past one
    for (int k = 1; k < len; ++k)
      s.push_back(static_cast<char>(0x70 + rng() % 0x60));  // around the continuation range
    ASSERT_EQ(FullMatch(g, s), expected(s)) << i;
  }
}

// Random classes against their code-point sets, at every UTF-8 boundary and at random points.
TEST(RegexGrammarTest, ClassRangesBecomeExactUtf8Sets) {
  std::mt19937 rng(11);
  const std::vector<uint32_t> boundaries = {0,       0x7F,    0x80,     0x7FF,   0x800,   0xFFF,
                                            0x1000,  0xD7FF,  0xE000,   0xFFFF,  0x10000, 0x3FFFF,
                                            0x40000, 0xFFFFF, 0x100000, 0x10FFFF};
  for (int round = 0; round < 40; ++round) {
    std::vector<CodeRange> ranges;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      uint32_t lo = boundaries[rng() % boundaries.size()] + rng() % 3;
      uint32_t hi = boundaries[rng() % boundaries.size()] + rng() % 3;
      lo = std::min(lo, kMaxCodePoint);
      hi = std::min(hi, kMaxCodePoint);
      if (lo > hi)
        std::swap(lo, hi);
      ranges.push_back({lo, hi});
    }
    const bool negate = rng() % 2 == 0;
    std::string pattern = negate ? "[^" : "[";
    for (const CodeRange& r : ranges)
      pattern += fmt::format("\\U{:08x}-\\U{:08x}", r.lo, r.hi);
    pattern += "]";
    std::vector<CodeRange> set = NormalizeClass(ranges);
    if (negate)
      set = ComplementClass(set);
    absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileRegex(pattern);
    if (set.empty()) {
      EXPECT_FALSE(g.ok()) << pattern;
      continue;
    }
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status();
    const auto in_set = [&](uint32_t cp) {
      for (const CodeRange& r : set) {
        if (cp >= r.lo && cp <= r.hi)
          return true;
      }
      return false;
    };
    std::vector<uint32_t> probes;
    for (uint32_t b : boundaries) {
      for (uint32_t d : {0u, 1u, 2u, 3u}) {
        probes.push_back(b + d);
        probes.push_back(b >= d ? b - d : 0);
      }
    }
    for (const CodeRange& r : ranges) {
      for (uint32_t p : {r.lo, r.hi, r.lo + 1, r.hi + 1, r.lo - 1})
        probes.push_back(p);
    }
    for (int i = 0; i < 300; ++i)
      probes.push_back(rng() % (kMaxCodePoint + 1));
    for (uint32_t cp : probes) {
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        continue;
      ASSERT_EQ(FullMatch(*g, Utf8(cp)), in_set(cp)) << pattern << " U+" << std::hex << cp;
    }
  }
}

TEST(RegexGrammarTest, CompletionStates) {
  std::shared_ptr<const Grammar> g = MustCompile("ab?");
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.AcceptBytes("a"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.CanContinue());
  ASSERT_TRUE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.CanContinue());
  GrammarMatcher empty(MustCompile(""));
  EXPECT_TRUE(empty.CanEnd());
  EXPECT_FALSE(empty.CanContinue());
}

struct ErrorCase {
  std::string pattern;
  std::string fragment;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.pattern;
}

class RegexErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RegexErrorTest, RefusesWithAClearMessage) {
  const ErrorCase& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileRegex(c.pattern);
  ASSERT_FALSE(g.ok()) << c.pattern;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.fragment)) << c.pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Errors, RegexErrorTest,
    ::testing::Values(
        ErrorCase{"(?=a)b", "lookahead"}, ErrorCase{"a(?!b)", "lookahead"},
        ErrorCase{"(?<=a)b", "lookbehind"}, ErrorCase{"(?<!a)b", "lookbehind"},
        ErrorCase{R"((a)\1)", "backreference"}, ErrorCase{"(?P<n>a)(?P=n)", "backreference"},
        ErrorCase{R"(\bfoo)", "word boundaries"}, ErrorCase{R"(a\B)", "\\B"},
        ErrorCase{"a**", "multiple repeat"}, ErrorCase{"a{2}{3}", "multiple repeat"},
        ErrorCase{"*a", "nothing to repeat"}, ErrorCase{"a|?", "nothing to repeat"},
        ErrorCase{"{2}", "nothing to repeat"}, ErrorCase{"^*", "nothing to repeat"},
        ErrorCase{"(ab", "missing ), unterminated subpattern (at offset 0)"},
        ErrorCase{"ab)", "unbalanced parenthesis ')' (at offset 2)"},
        ErrorCase{"[abc", "unterminated character set"},
        ErrorCase{"[]", "unterminated character set"}, ErrorCase{"[z-a]", "bad character range"},
        ErrorCase{R"([\d-z])", "bad character range"},
        ErrorCase{"a{5,3}", "min repeat greater than max repeat"},
        ErrorCase{"a{100000}", "repetition counts above 65536"},
        ErrorCase{"(?i)abc", "inline flags"}, ErrorCase{"(?s:.)", "inline flags"},
        ErrorCase{"a*+", "possessive"}, ErrorCase{"(?>a)", "atomic group"},
        ErrorCase{"(?(1)a|b)", "conditional"}, ErrorCase{R"(\p{L})", "\\p{...}"},
        ErrorCase{R"(\N{DIGIT ONE})", "\\N{...}"}, ErrorCase{R"(\q)", "bad escape \\q"},
        ErrorCase{R"(\x4)", "incomplete escape \\x"},
        ErrorCase{"a^b", "'^' (or \\A) is only supported at the start"},
        ErrorCase{"a$b", "'$' (or \\Z) is only supported at the end"},
        ErrorCase{"(a$)*", "'$' inside a repeated group"},
        ErrorCase{"(a$)b", "only supported at the end"}, ErrorCase{R"(\ud800)", "surrogate"},
        ErrorCase{R"([\ud800-\udfff])", "matches nothing"}, ErrorCase{"\xC3(", "invalid UTF-8"},
        ErrorCase{"(?P<>a)", "bad group name"}, ErrorCase{"(?Q)", "unknown extension"},
        ErrorCase{"\\", "bad escape"}));

TEST(RegexGrammarTest, LimitsAreErrorsNotCrashes) {
  // Group nesting.
  const std::string deep =
      std::string(kMaxEbnfNesting + 1, '(') + "a" + std::string(kMaxEbnfNesting + 1, ')');
  EXPECT_THAT(std::string(CompileRegex(deep).status().message()), HasSubstr("nest"));
  const std::string ok_depth =
      std::string(kMaxEbnfNesting, '(') + "a" + std::string(kMaxEbnfNesting, ')');
  EXPECT_TRUE(CompileRegex(ok_depth).ok());
  // Text size.
  EXPECT_THAT(std::string(CompileRegex(std::string(kMaxEbnfTextBytes + 1, 'a')).status().message()),
              HasSubstr("too long"));
  // States: each count is allowed, their sum is not.
  absl::StatusOr<std::shared_ptr<const Grammar>> big =
      CompileRegex("a{65536}b{65536}c{65536}d{65536}e{65536}");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("too large"));
  // Nested counts multiply only through a shared rule, so they stay small.
  std::shared_ptr<const Grammar> nested = MustCompile("((ab){100}c){100}");
  ASSERT_NE(nested, nullptr);
  EXPECT_LT(nested->num_states(), 1000);
  std::string text;
  for (int i = 0; i < 100; ++i) {
    for (int k = 0; k < 100; ++k)
      text += "ab";
    text += "c";
  }
  EXPECT_TRUE(FullMatch(nested, text));
  EXPECT_FALSE(FullMatch(nested, text.substr(2)));
  // A long run of parts that may be empty: epsilon closures would be quadratic. (Empty groups
  // reach the bound with the least work; `a?a?a?...` takes the same path.)
  std::string empties;
  for (int i = 0; i < 60000; ++i)
    empties += "()";
  absl::StatusOr<std::shared_ptr<const Grammar>> chain = CompileRegex(empties + "a");
  ASSERT_FALSE(chain.ok());
  EXPECT_THAT(std::string(chain.status().message()), HasSubstr("too many optional parts"));
  std::string fewer;
  for (int i = 0; i < 100; ++i)
    fewer += "a?";
  std::shared_ptr<const Grammar> ok_chain = MustCompile(fewer);
  ASSERT_NE(ok_chain, nullptr);
  EXPECT_TRUE(FullMatch(ok_chain, std::string(100, 'a')));
  EXPECT_FALSE(FullMatch(ok_chain, std::string(101, 'a')));
}

}  // namespace
}  // namespace switchyard::structured
