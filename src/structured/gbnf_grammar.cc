#include "structured/gbnf_grammar.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "structured/ebnf.h"

namespace switchyard::structured {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : p_(text) {}

  absl::StatusOr<EbnfGrammar> Parse() {
    if (p_.size() > kMaxEbnfTextBytes) {
      return absl::InvalidArgumentError(fmt::format(
          "grammar: the text is too long ({} bytes, at most {})", p_.size(), kMaxEbnfTextBytes));
    }
    SkipSpace();
    while (pos_ < p_.size()) {
      const size_t at = pos_;
      const std::string_view name = Name();
      if (name.empty())
        return Error(at, "expected a rule name");
      SkipSpace();
      if (p_.substr(pos_, 3) != "::=")
        return Error(pos_, fmt::format("expected '::=' after the rule name '{}'", Printable(name)));
      pos_ += 3;
      SY_ASSIGN_OR_RETURN(EbnfExpr body, ParseAlt(0));
      if (pos_ < p_.size() && p_[pos_] == ')')
        return Error(pos_, "unbalanced ')'");
      const int32_t rule = RuleId(name, at);
      Info& info = info_[static_cast<size_t>(rule)];
      if (info.defined)
        return Error(at, fmt::format("rule '{}' is defined twice", Printable(name)));
      info.defined = true;
      g_.rules[static_cast<size_t>(rule)].body = std::move(body);
    }
    for (size_t r = 0; r < info_.size(); ++r) {
      if (!info_[r].defined) {
        return Error(info_[r].first_use,
                     fmt::format("rule '{}' is not defined", Printable(g_.rules[r].name)));
      }
    }
    auto root = ids_.find("root");
    if (root == ids_.end())
      return absl::InvalidArgumentError("grammar: there is no 'root' rule");
    g_.root = root->second;
    return std::move(g_);
  }

 private:
  struct Info {
    bool defined = false;
    size_t first_use = 0;
  };

  absl::Status Error(size_t at, std::string_view what) const {
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < p_.size(); ++i) {
      if (p_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return absl::InvalidArgumentError(
        fmt::format("grammar: {} (at line {}, column {})", what, line, at - line_start + 1));
  }

  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }

  void SkipSpace() {
    while (pos_ < p_.size()) {
      const char c = p_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < p_.size() && p_[pos_] != '\n')
          ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view Name() {
    const size_t begin = pos_;
    while (pos_ < p_.size() && IsNameChar(p_[pos_]))
      ++pos_;
    return p_.substr(begin, pos_ - begin);
  }

  // Whether `name ::=` starts at `pos_` (the next rule).
  bool AtRuleStart() {
    const size_t saved = pos_;
    const bool named = !Name().empty();
    while (Peek(' ') || Peek('\t'))
      ++pos_;
    const bool assign = named && p_.substr(pos_, 3) == "::=";
    pos_ = saved;
    return assign;
  }

  int32_t RuleId(std::string_view name, size_t at) {
    auto [it, fresh] = ids_.try_emplace(std::string(name), static_cast<int32_t>(g_.rules.size()));
    if (fresh) {
      g_.rules.push_back({std::string(name), EbnfExpr::Seq({})});
      info_.push_back({false, at});
    }
    return it->second;
  }

  absl::StatusOr<EbnfExpr> ParseAlt(int depth) {
    std::vector<EbnfExpr> options;
    while (true) {
      SY_ASSIGN_OR_RETURN(EbnfExpr seq, ParseSeq(depth));
      options.push_back(std::move(seq));
      if (!Peek('|'))
        break;
      ++pos_;
    }
    if (options.size() == 1)
      return std::move(options[0]);
    return EbnfExpr::Alt(std::move(options));
  }

  absl::StatusOr<EbnfExpr> ParseSeq(int depth) {
    std::vector<EbnfExpr> items;
    while (true) {
      SkipSpace();
      if (pos_ >= p_.size() || Peek('|') || Peek(')') || AtRuleStart())
        break;
      SY_ASSIGN_OR_RETURN(EbnfExpr item, ParsePrimary(depth));
      SkipSpace();
      const size_t op_at = pos_;
      int32_t min = 0;
      int32_t max = 0;
      SY_ASSIGN_OR_RETURN(bool repeated, ParseRepetition(&min, &max));
      if (!repeated) {
        if (item.kind == EbnfExpr::Kind::kLiteral && !items.empty() &&
            items.back().kind == EbnfExpr::Kind::kLiteral) {
          items.back().literal += item.literal;
        } else {
          items.push_back(std::move(item));
        }
        continue;
      }
      SkipSpace();
      if (Peek('*') || Peek('+') || Peek('?') || Peek('{'))
        return Error(op_at, "repetition operators cannot follow one another; use parentheses");
      items.push_back(EbnfExpr::Repeat(std::move(item), min, max));
    }
    if (items.size() == 1)
      return std::move(items[0]);
    return EbnfExpr::Seq(std::move(items));
  }

  absl::StatusOr<bool> ParseRepetition(int32_t* min, int32_t* max) {
    if (Peek('*') || Peek('+') || Peek('?')) {
      const char c = p_[pos_++];
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
      return true;
    }
    if (!Peek('{'))
      return false;
    const size_t at = pos_++;
    const auto number = [&]() -> absl::StatusOr<std::optional<int32_t>> {
      SkipSpace();
      if (pos_ >= p_.size() || p_[pos_] < '0' || p_[pos_] > '9')
        return std::optional<int32_t>();
      int64_t n = 0;
      while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
        n = n * 10 + (p_[pos_++] - '0');
        if (n > kMaxEbnfRepeat) {
          return Error(at,
                       fmt::format("repetition counts above {} are not supported", kMaxEbnfRepeat));
        }
      }
      SkipSpace();
      return std::optional<int32_t>(static_cast<int32_t>(n));
    };
    SY_ASSIGN_OR_RETURN(std::optional<int32_t> lo, number());
    std::optional<int32_t> hi = lo;
    if (Peek(',')) {
      ++pos_;
      SY_ASSIGN_OR_RETURN(hi, number());
    } else if (!lo.has_value()) {
      return Error(at, "expected a repetition count in '{...}'");
    }
    if (!Peek('}'))
      return Error(at, "expected '}' to close the repetition count");
    ++pos_;
    if (lo.has_value() && hi.has_value() && *hi < *lo)
      return Error(at, "the repetition's maximum is below its minimum");
    *min = lo.value_or(0);
    *max = hi.value_or(-1);
    return true;
  }

  absl::StatusOr<EbnfExpr> ParsePrimary(int depth) {
    const size_t at = pos_;
    const char c = p_[pos_];
    if (c == '"')
      return ParseString();
    if (c == '[')
      return ParseClass();
    if (c == '.') {
      ++pos_;
      return EbnfExpr::Class(ComplementClass({}));
    }
    if (c == '(') {
      if (pos_ + 1 < p_.size() && p_[pos_ + 1] == '=')
        return Error(at, "lookahead assertions '(= ...)' are not supported");
      if (depth + 1 > kMaxEbnfNesting)
        return Error(at, fmt::format("groups nest more than {} deep", kMaxEbnfNesting));
      ++pos_;
      SY_ASSIGN_OR_RETURN(EbnfExpr inner, ParseAlt(depth + 1));
      if (!Peek(')'))
        return Error(at, "missing ')' for this '('");
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) {
      const std::string_view name = Name();
      return EbnfExpr::Ref(RuleId(name, at));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{')
      return Error(at, "a repetition operator needs something before it");
    return Error(at, fmt::format("unexpected character '{}'", Printable(p_.substr(pos_, 1))));
  }

  // One character of a literal or class: an escape or a UTF-8 character. `shorthand` receives
  // the class of \d \w \s \D \W \S where those are allowed (non-null).
  absl::StatusOr<uint32_t> ParseChar(std::optional<std::vector<CodeRange>>* shorthand) {
    const size_t at = pos_;
    if (p_[pos_] != '\\') {
      const base::Utf8Decoded d = base::DecodeUtf8(p_.substr(pos_));
      if (!d.valid)
        return Error(at, "invalid UTF-8");
      pos_ += d.length;
      return d.code_point;
    }
    if (pos_ + 1 >= p_.size())
      return Error(at, "an escape at the end of the text");
    const char e = p_[pos_ + 1];
    pos_ += 2;
    size_t digits = 0;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'a':
        return '\a';
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case '0':
        return 0;
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<uint32_t>(e);
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S':
        if (shorthand != nullptr) {
          *shorthand = ShorthandClass(e);
          return 0;
        }
        [[fallthrough]];
      default:
        return Error(at, fmt::format("unknown escape '\\{}'", Printable(std::string_view(&e, 1))));
    }
    const std::optional<uint32_t> cp = ParseHexDigits(p_.substr(pos_), digits);
    if (!cp.has_value())
      return Error(at, fmt::format("expected {} hex digits after '\\{}'", digits, e));
    if (*cp > kMaxCodePoint)
      return Error(at, "a code point above U+10FFFF");
    pos_ += digits;
    return *cp;
  }

  absl::StatusOr<EbnfExpr> ParseString() {
    const size_t at = pos_++;
    std::string text;
    while (true) {
      if (pos_ >= p_.size() || p_[pos_] == '\n')
        return Error(at, "unterminated string literal");
      if (p_[pos_] == '"')
        break;
      const size_t char_at = pos_;
      SY_ASSIGN_OR_RETURN(uint32_t cp, ParseChar(nullptr));
      if (cp >= 0xD800 && cp <= 0xDFFF)
        return Error(char_at, "a surrogate code point cannot be written as UTF-8");
      base::AppendUtf8(cp, &text);
    }
    ++pos_;
    return EbnfExpr::Literal(std::move(text));
  }

  absl::StatusOr<EbnfExpr> ParseClass() {
    const size_t at = pos_++;
    const bool negate = Peek('^');
    if (negate)
      ++pos_;
    std::vector<CodeRange> ranges;
    while (true) {
      if (pos_ >= p_.size())
        return Error(at, "unterminated character class");
      if (Peek(']'))
        break;
      const size_t item_at = pos_;
      std::optional<std::vector<CodeRange>> shorthand;
      SY_ASSIGN_OR_RETURN(uint32_t lo, ParseChar(&shorthand));
      const bool range = Peek('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']';
      if (shorthand.has_value()) {
        if (range)
          return Error(item_at, "a class shorthand cannot start a range");
        ranges.insert(ranges.end(), shorthand->begin(), shorthand->end());
        continue;
      }
      if (!range) {
        ranges.push_back({lo, lo});
        continue;
      }
      ++pos_;
      SY_ASSIGN_OR_RETURN(uint32_t hi, ParseChar(&shorthand));
      if (shorthand.has_value() || hi < lo)
        return Error(item_at, "bad character range");
      ranges.push_back({lo, hi});
    }
    ++pos_;
    ranges = NormalizeClass(std::move(ranges));
    if (negate)
      ranges = ComplementClass(ranges);
    if (ranges.empty())
      return Error(at, "the character class matches nothing");
    return EbnfExpr::Class(std::move(ranges));
  }

  std::string_view p_;
  size_t pos_ = 0;
  EbnfGrammar g_;
  std::vector<Info> info_;  // by rule id
  absl::flat_hash_map<std::string, int32_t> ids_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(std::string_view text) {
  SY_ASSIGN_OR_RETURN(EbnfGrammar g, GbnfParser(text).Parse());
  return CompileEbnf(g);
}

}  // namespace switchyard::structured
