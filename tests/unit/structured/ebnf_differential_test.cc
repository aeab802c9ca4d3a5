// Random expressions written two ways (a Python-style regex for CompileRegex and a GBNF
// grammar with random parts lifted into named rules for CompileGbnf) must accept exactly the
// strings that a direct evaluation of the expression tree accepts (the set of end positions
// each part can reach from a set of start positions). Nullable parts, empty alternatives and
// nested repetitions are common in the generated expressions, so this checks the compilers'
// handling of empty sentences against an independent definition of the language.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "grammar_test_util.h"
#include "structured/gbnf_grammar.h"
#include "structured/regex_grammar.h"

namespace switchyard::structured {
namespace {

// An expression over the alphabet {a, b, c}, with its two renderings.
struct Expr {
  enum class Kind { kChars, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kSeq;
  std::string chars;  // kChars: the characters it matches (one of them)
  std::vector<std::unique_ptr<Expr>> parts;
  int min = 0;
  int max = -1;
  std::string regex;
  std::string gbnf;

  // Bit j of the result: some match of this part from a start in `starts` ends at j.
  uint32_t Ends(const std::string& s, uint32_t starts) const {
    switch (kind) {
      case Kind::kChars: {
        uint32_t out = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          if ((starts >> i & 1) != 0 && chars.find(s[i]) != std::string::npos)
            out |= 1u << (i + 1);
        }
        return out;
      }
      case Kind::kSeq:
        for (const auto& p : parts)
          starts = p->Ends(s, starts);
        return starts;
      case Kind::kAlt: {
        uint32_t out = 0;
        for (const auto& p : parts)
          out |= p->Ends(s, starts);
        return out;
      }
      case Kind::kRepeat:
        break;
    }
    uint32_t cur = starts;
    for (int k = 0; k < min; ++k)
      cur = parts[0]->Ends(s, cur);
    uint32_t out = cur;
    for (int k = min; max < 0 || k < max; ++k) {
      cur = parts[0]->Ends(s, cur);
      if (max < 0 && (out | cur) == out)
        break;
      out |= cur;
    }
    return out;
  }
};

class ExprGenerator {
 public:
  explicit ExprGenerator(uint32_t seed) : rng_(seed) {}

  std::unique_ptr<Expr> Generate(int depth) {
    auto e = std::make_unique<Expr>();
    switch (depth <= 0 ? Pick(3) : Pick(8)) {
      case 0:
        e->kind = Expr::Kind::kChars;
        e->chars = std::string(1, "abc"[Pick(3)]);
        e->regex = e->chars;
        e->gbnf = "\"" + e->chars + "\"";
        return e;
      case 1: {
        static const char* kClasses[][2] = {{"[ab]", "ab"}, {"[^a]", "bc"}, {"[b-c]", "bc"}};
        const int k = Pick(3);
        e->kind = Expr::Kind::kChars;
        e->chars = kClasses[k][1];
        e->regex = e->gbnf = kClasses[k][0];
        return e;
      }
      case 2:
        e->kind = Expr::Kind::kSeq;
        e->regex = "(?:)";
        e->gbnf = "\"\"";
        return e;
      case 3:
      case 4: {
        const bool alt = Pick(2) == 0;
        e->kind = alt ? Expr::Kind::kAlt : Expr::Kind::kSeq;
        const int n = 2 + Pick(2);
        e->regex = "(?:";
        e->gbnf = "(";
        for (int i = 0; i < n; ++i) {
          if (i > 0) {
            e->regex += alt ? "|" : "";
            e->gbnf += alt ? " | " : " ";
          }
          // An empty alternative, or a part.
          e->parts.push_back(alt && Pick(4) == 0 ? std::make_unique<Expr>() : Generate(depth - 1));
          e->regex += e->parts.back()->regex;
          e->gbnf += e->parts.back()->gbnf;
        }
        e->regex += ")";
        e->gbnf += ")";
        return Lift(std::move(e));
      }
      default: {
        static const char* kOps[] = {"*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,2}", "{2,3}"};
        static const int kBounds[][2] = {{0, -1}, {1, -1}, {0, 1}, {2, 2},
                                         {1, -1}, {0, 2},  {1, 2}, {2, 3}};
        const int k = Pick(8);
        e->kind = Expr::Kind::kRepeat;
        e->min = kBounds[k][0];
        e->max = kBounds[k][1];
        e->parts.push_back(Generate(depth - 1));
        e->regex = "(?:" + e->parts[0]->regex + ")" + kOps[k];
        e->gbnf = "(" + e->parts[0]->gbnf + ")" + kOps[k];
        return Lift(std::move(e));
      }
    }
  }

  const std::string& rules() const { return rules_; }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }

  // Sometimes makes the GBNF form a rule of its own.
  std::unique_ptr<Expr> Lift(std::unique_ptr<Expr> e) {
    if (Pick(3) != 0)
      return e;
    const std::string name = fmt::format("r{}", next_rule_++);
    rules_ += fmt::format("{} ::= {}\n", name, e->gbnf);
    e->gbnf = name;
    return e;
  }

  std::mt19937 rng_;
  std::string rules_;
  int next_rule_ = 0;
};

std::vector<std::string> AllStrings(size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0; begin < out.size(); ++begin) {
    if (out[begin].size() == max_len)
      continue;
    for (char c : std::string("abc"))
      out.push_back(out[begin] + c);
  }
  return out;
}

TEST(EbnfDifferentialTest, RegexAndGbnfAgreeWithTheExpression) {
  const std::vector<std::string> strings = AllStrings(5);
  for (uint32_t seed = 0; seed < 300; ++seed) {
    ExprGenerator gen(seed);
    const std::unique_ptr<Expr> root = gen.Generate(4);
    const std::string gbnf = "root ::= " + root->gbnf + "\n" + gen.rules();
    absl::StatusOr<std::shared_ptr<const Grammar>> from_regex = CompileRegex(root->regex);
    ASSERT_TRUE(from_regex.ok()) << root->regex << ": " << from_regex.status();
    absl::StatusOr<std::shared_ptr<const Grammar>> from_gbnf = CompileGbnf(gbnf);
    ASSERT_TRUE(from_gbnf.ok()) << gbnf << ": " << from_gbnf.status();
    for (const std::string& s : strings) {
      const bool expected = (root->Ends(s, 1u) >> s.size() & 1) != 0;
      ASSERT_EQ(FullMatch(*from_regex, s), expected)
          << "regex " << root->regex << " on '" << s << "'";
      ASSERT_EQ(FullMatch(*from_gbnf, s), expected) << "grammar\n" << gbnf << "on '" << s << "'";
    }
  }
}

}  // namespace
}  // namespace switchyard::structured
