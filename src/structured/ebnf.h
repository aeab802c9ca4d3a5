// Ebnf: the grammar form the regex and GBNF compilers parse into (named rules whose bodies
// are trees of literals, character classes, rule references, sequences, alternatives and
// bounded or unbounded repetitions), and its compiler to a Grammar.
//
// The Grammar requires that no called rule accepts the empty string and that no rule reaches
// itself through calls before consuming a byte. CompileEbnf meets the first by construction:
// every rule and every part lifted into a rule of its own is compiled without its empty
// sentence, and each place that refers to a part that can match empty also gets an epsilon
// move past it. Left recursion (a rule that can reach itself without consuming anything) is
// an InvalidArgument naming the rules on the cycle. Parts that a construction repeats (a
// counted repetition, a part that must appear in both the empty and the non-empty track of a
// sequence) are lifted into rules of their own unless small, so the compiled size stays
// linear in the tree's size plus the repetition counts, and GrammarBuilder::kMaxStates bounds
// it. Only rules reachable from the root are compiled. Stateless functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "structured/char_class.h"
#include "structured/grammar.h"

namespace switchyard::structured {

// Bounds the parsers enforce on client input, so that hostile text cannot exhaust memory,
// time or stack: the text's size, the nesting of groups and the counts of a repetition.
constexpr size_t kMaxEbnfTextBytes = 1 << 17;
constexpr int kMaxEbnfNesting = 64;
constexpr int32_t kMaxEbnfRepeat = 1 << 16;

struct EbnfExpr {
  enum class Kind : uint8_t { kLiteral, kClass, kRef, kSeq, kAlt, kRepeat };

  static EbnfExpr Literal(std::string bytes);
  static EbnfExpr Class(std::vector<CodeRange> ranges);
  static EbnfExpr Ref(int32_t rule);
  static EbnfExpr Seq(std::vector<EbnfExpr> items);
  static EbnfExpr Alt(std::vector<EbnfExpr> items);
  static EbnfExpr Repeat(EbnfExpr item, int32_t min, int32_t max);

  Kind kind = Kind::kSeq;
  std::string literal;            // kLiteral: UTF-8 text; empty matches the empty string
  std::vector<CodeRange> ranges;  // kClass: normalized (NormalizeClass); empty matches nothing
  int32_t rule = 0;               // kRef: index into EbnfGrammar::rules
  int32_t min = 0;                // kRepeat: at least `min` and at most `max` times,
  int32_t max = -1;               //   max -1 for unbounded
  std::vector<EbnfExpr> items;    // kSeq, kAlt: the parts; kRepeat: the one repeated part
};

struct EbnfRule {
  std::string name;  // for error messages
  EbnfExpr body;
};

struct EbnfGrammar {
  std::vector<EbnfRule> rules;
  int32_t root = 0;
};

// REQUIRES: every kRef names a rule of `g`, and trees nest at most a few times
// kMaxEbnfNesting deep (the compiler recurses over them). InvalidArgument for left recursion
// and for grammars past GrammarBuilder::kMaxStates.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileEbnf(const EbnfGrammar& g);

// The value of the first `digits` characters of `s` read as hex digits; nullopt when `s` is
// shorter or one of them is not a hex digit.
std::optional<uint32_t> ParseHexDigits(std::string_view s, size_t digits);

// Client text quoted in an error message: at most 64 bytes, non-printable bytes as '?'.
std::string Printable(std::string_view s);

}  // namespace switchyard::structured
