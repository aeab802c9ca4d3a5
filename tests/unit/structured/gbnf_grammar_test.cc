// The GBNF compiler: which texts each grammar accepts (through the real matcher), nullable
// rules and recursion, syntax (comments, newlines, continuation lines), and the errors it
// gives for left recursion, undefined rules and bad syntax.
#include "structured/gbnf_grammar.h"

#include <ostream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "grammar_test_util.h"
#include "structured/ebnf.h"
#include "structured/grammar_cache.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string grammar;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

// Failures print the grammar, not the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.grammar;
}

class GbnfCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(GbnfCaseTest, AcceptsExactlyTheValidTexts) {
  const Case& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileGbnf(c.grammar);
  ASSERT_TRUE(g.ok()) << c.grammar << ": " << g.status();
  for (const std::string& text : c.valid)
    EXPECT_TRUE(FullMatch(*g, text)) << c.grammar << "\nshould accept '" << text << "'";
  for (const std::string& text : c.invalid)
    EXPECT_FALSE(FullMatch(*g, text)) << c.grammar << "\nshould reject '" << text << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Grammars, GbnfCaseTest,
    ::testing::Values(
        Case{R"g(root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= num | "(" ws expr ws ")"
num    ::= [0-9]+
ws     ::= [ \t\n]*
)g",
             {"1+2*3", "(1+2)*3", "( 1 )", "((2))", "10/(3-1)"},
             {"1+", "()", "1++2", "( 1 ) )", "", " 1"}},
        // A nullable root and a nullable rule used by it.
        Case{"root ::= ws\nws ::= \" \"*", {"", "   "}, {"x"}},
        // Every part nullable, through rules, groups and repetitions.
        Case{R"g(root ::= a b c
a ::= "x"?
b ::= "y"*
c ::= ("z" | "")
)g",
             {"", "x", "y", "z", "xyyz", "yz", "xz"},
             {"zx", "xx", "zz", "yx"}},
        // Nullable only indirectly (b is empty-or-q; a is b).
        Case{R"g(root ::= "<" inner ">"
inner ::= a a
a ::= b
b ::= "q" | ""
)g",
             {"<>", "<q>", "<qq>"},
             {"<qqq>", "<", "q"}},
        // Right recursion through the root itself, with the empty sentence.
        Case{R"g(root ::= "(" root ")" root | "")g",
             {"", "()", "(())", "()()", "(()())"},
             {"(", ")(", "(()"}},
        Case{"root ::= item (\",\" ws item)*\nitem ::= [a-z]+\nws ::= \" \"?",
             {"a", "ab,c", "a, b,cd"},
             {"a,", ",a", "a,  b", "A"}},
        Case{R"g(root ::= "a"{3} "b"{2,} "c"{1,2} "d"{,1})g",
             {"aaabbc", "aaabbbbccd", "aaabbcc"},
             {"aabbc", "aaabc", "aaabbccc", "aaabbcdd"}},
        Case{"root ::= [\xCE\xB1-\xCF\x89]+ [^\\x00-\\x7F]",  // [α-ω]+ [^\x00-\x7F]
             {"\xCE\xB1\xCE\xB2\xC3\xA9", "\xCF\x89\xF0\x9F\x98\x80"},
             {"\xCE\xB1"
              "a",
              "a\xC3\xA9", "\xCE\xB1"}},
        Case{R"g(root ::= "\x41\u00e9\n\"\\\t\[\]")g", {"A\xC3\xA9\n\"\\\t[]"}, {"A"}},
        Case{R"g(root ::= [\d]+ [\s] [\w\-]+ [\]\[])g", {"12 a-b_c]", "1\tz["}, {"1 a", "a a]"}},
        Case{"# a comment\nroot ::= (\n  \"a\" # inline\n  | \"b\"   # more\n)\n# tail",
             {"a", "b"},
             {"ab", ""}},
        Case{"root ::= \"a\"\n  | \"b\"\n  | other\nother ::= \"c\"", {"a", "b", "c"}, {"d"}},
        Case{"root ::= . .", {"ab", "\n\xC3\xA9"}, {"a", "abc"}},
        Case{"root::=\"a\"x\nx::=\"b\"", {"ab"}, {"a"}}, Case{"root ::=", {""}, {"a"}},
        Case{"root ::= \"\" \"a\" \"\"", {"a"}, {""}},
        Case{"root ::= (\"ab\" | \"cd\"){2,3}", {"abcd", "cdcdab"}, {"ab", "abcdabcd"}},
        Case{"root ::= x*\nx ::= \"a\" | \"\"", {"", "a", "aaa"}, {"b"}},
        Case{"root ::= (x y)+\nx ::= \"a\"?\ny ::= \"b\"?", {"", "a", "b", "abba", "bbb"}, {"c"}},
        Case{"root ::= unused-rule-is-fine | \"z\"\nunused-rule-is-fine ::= \"u\"\n"
             "never ::= never \"x\"",
             {"u", "z"},
             {"x"}}));

// A long chain of rules: the analyses and the matcher handle depth without recursion.
TEST(GbnfGrammarTest, LongRuleChains) {
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 2000; ++i)
    text += fmt::format("r{} ::= \"a\" r{} | \"\"\n", i, i + 1);
  text += "r2000 ::= \"end\"\n";
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileGbnf(text);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FullMatch(*g, ""));
  EXPECT_TRUE(FullMatch(*g, "aaa"));
  EXPECT_TRUE(FullMatch(*g, std::string(2000, 'a') + "end"));
  EXPECT_FALSE(FullMatch(*g, std::string(1999, 'a') + "end"));
}

struct ErrorCase {
  std::string grammar;
  std::string fragment;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.grammar;
}

class GbnfErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(GbnfErrorTest, RefusesWithAClearMessage) {
  const ErrorCase& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileGbnf(c.grammar);
  ASSERT_FALSE(g.ok()) << c.grammar;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.fragment)) << c.grammar;
}

INSTANTIATE_TEST_SUITE_P(
    Errors, GbnfErrorTest,
    ::testing::Values(
        ErrorCase{"root ::= root \"a\" | \"a\"", "left recursion: rule 'root'"},
        ErrorCase{"root ::= a\na ::= b \"x\"\nb ::= ws a\nws ::= \" \"*", "(a -> b -> a)"},
        ErrorCase{"root ::= (\"x\" | \"\")* root \"y\" | \"y\"", "left recursion"},
        ErrorCase{"root ::= foo", "rule 'foo' is not defined (at line 1, column 10)"},
        ErrorCase{"a ::= \"x\"", "there is no 'root' rule"}, ErrorCase{"", "no 'root' rule"},
        ErrorCase{"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice (at line 2"},
        ErrorCase{"root ::= \"abc", "unterminated string literal"},
        ErrorCase{"root ::= \"a\nb\"", "unterminated string literal"},
        ErrorCase{"root ::= [a-", "unterminated character class"},
        ErrorCase{"root ::= (\"a\"", "missing ')'"}, ErrorCase{"root ::= \"a\")", "unbalanced ')'"},
        ErrorCase{"root = \"a\"", "expected '::=' after the rule name 'root'"},
        ErrorCase{"::= \"a\"", "expected a rule name (at line 1, column 1)"},
        ErrorCase{"root ::= \"a\"**", "cannot follow one another"},
        ErrorCase{"root ::= \"a\"+?", "cannot follow one another"},
        ErrorCase{"root ::= *", "needs something before it"},
        ErrorCase{R"g(root ::= "\q")g", "unknown escape '\\q'"},
        ErrorCase{R"g(root ::= "\d")g", "unknown escape '\\d'"},
        ErrorCase{R"g(root ::= "\x4")g", "expected 2 hex digits"},
        ErrorCase{R"g(root ::= "\ud800")g", "surrogate"},
        ErrorCase{"root ::= []", "matches nothing"},
        ErrorCase{"root ::= [z-a]", "bad character range"},
        ErrorCase{R"g(root ::= [\d-z])g", "shorthand cannot start a range"},
        ErrorCase{"root ::= \"a\" (= \"b\")", "lookahead assertions"},
        ErrorCase{"root ::= \"a\"{3,1}", "maximum is below its minimum"},
        ErrorCase{"root ::= \"a\"{70000}", "repetition counts above 65536"},
        ErrorCase{"root ::= \"a\"{x}", "expected a repetition count"},
        ErrorCase{"root ::= \"a\"{2", "expected '}'"},
        ErrorCase{"root ::= @", "unexpected character '@'"},
        ErrorCase{"root ::= \"\xC3\"", "invalid UTF-8"}));

TEST(GbnfGrammarTest, LimitsAreErrorsNotCrashes) {
  const std::string deep = "root ::= " + std::string(kMaxEbnfNesting + 1, '(') + "\"a\"" +
                           std::string(kMaxEbnfNesting + 1, ')');
  EXPECT_THAT(std::string(CompileGbnf(deep).status().message()), HasSubstr("nest"));
  EXPECT_THAT(std::string(CompileGbnf("root ::= \"" + std::string(kMaxEbnfTextBytes, 'a') + "\"")
                              .status()
                              .message()),
              HasSubstr("too long"));
  absl::StatusOr<std::shared_ptr<const Grammar>> big =
      CompileGbnf("root ::= [a-z]{65536} [a-z]{65536} [a-z]{65536} [a-z]{65536} [a-z]{65536}");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("too large"));
}

// Different kinds of constraint with the same text never share a cache entry.
TEST(GbnfGrammarTest, CacheKeysSeparateKinds) {
  GrammarCache cache(8);
  const std::string text = "root ::= \"a\"";
  auto gbnf = cache.Get({StructuredOutputSpec::Kind::kGrammar, text, {}});
  auto regex = cache.Get({StructuredOutputSpec::Kind::kRegex, text, {}});
  ASSERT_TRUE(gbnf.ok() && regex.ok());
  EXPECT_NE(gbnf->get(), regex->get());
  EXPECT_TRUE(FullMatch(*gbnf, "a"));
  EXPECT_FALSE(FullMatch(*regex, "a"));
  EXPECT_TRUE(FullMatch(*regex, text));
  auto again = cache.Get({StructuredOutputSpec::Kind::kGrammar, text, {}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), gbnf->get());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Get({StructuredOutputSpec::Kind::kRegex, "(", {}}).ok());
  EXPECT_FALSE(cache.Get({StructuredOutputSpec::Kind::kGrammar, "x ::= y", {}}).ok());
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace switchyard::structured
