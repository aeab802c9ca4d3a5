#include "structured/regex_grammar.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "structured/ebnf.h"

namespace switchyard::structured {
namespace {

bool IsQuantifierChar(char c) {
  return c == '*' || c == '+' || c == '?';
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : p_(pattern) {}

  absl::StatusOr<EbnfExpr> Parse() {
    if (p_.size() > kMaxEbnfTextBytes) {
      return absl::InvalidArgumentError(fmt::format(
          "regex: the pattern is too long ({} bytes, at most {})", p_.size(), kMaxEbnfTextBytes));
    }
    SY_ASSIGN_OR_RETURN(Parsed parsed, ParseAlt(true, 0));
    if (pos_ < p_.size())
      return Error(pos_, "unbalanced parenthesis ')'");
    return std::move(parsed.expr);
  }

 private:
  struct Parsed {
    EbnfExpr expr;
    bool end_anchor = false;  // holds a `$` that must stay at the end of the pattern
  };
  // An escape: one code point, or a class (\d, ...).
  struct Escape {
    uint32_t code_point = 0;
    std::optional<std::vector<CodeRange>> ranges;
  };

  absl::Status Error(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("regex: {} (at offset {})", what, at));
  }

  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool PeekAt(size_t at, char c) const { return at < p_.size() && p_[at] == c; }

  // Alternatives up to an unmatched ')' or the end. `at_start`: nothing can precede them.
  absl::StatusOr<Parsed> ParseAlt(bool at_start, int depth) {
    std::vector<EbnfExpr> options;
    bool end_anchor = false;
    while (true) {
      SY_ASSIGN_OR_RETURN(Parsed seq, ParseSeq(at_start, depth));
      end_anchor = end_anchor || seq.end_anchor;
      options.push_back(std::move(seq.expr));
      if (!Peek('|'))
        break;
      ++pos_;
    }
    if (options.size() == 1)
      return Parsed{std::move(options[0]), end_anchor};
    return Parsed{EbnfExpr::Alt(std::move(options)), end_anchor};
  }

  // Anchors at `pos_` (^ \A $ \Z \z): its length in bytes and whether it is a start anchor.
  std::optional<std::pair<size_t, bool>> Anchor() const {
    if (Peek('^') || Peek('$'))
      return std::pair<size_t, bool>{1, Peek('^')};
    if (Peek('\\') && pos_ + 1 < p_.size()) {
      const char c = p_[pos_ + 1];
      if (c == 'A' || c == 'Z' || c == 'z')
        return std::pair<size_t, bool>{2, c == 'A'};
    }
    return std::nullopt;
  }

  absl::StatusOr<Parsed> ParseSeq(bool at_start, int depth) {
    std::vector<EbnfExpr> items;
    bool start_ok = at_start;
    std::optional<size_t> end_at;  // offset of a `$` seen in this sequence
    while (pos_ < p_.size() && !Peek('|') && !Peek(')')) {
      const size_t at = pos_;
      if (auto anchor = Anchor()) {
        pos_ += anchor->first;
        if (anchor->second && !start_ok)
          return Error(at, "'^' (or \\A) is only supported at the start of the pattern");
        if (!anchor->second)
          end_at = at;
        SY_ASSIGN_OR_RETURN(bool quantified, AtQuantifier());
        if (quantified)
          return Error(pos_, "nothing to repeat");
        continue;
      }
      if (end_at.has_value())
        return Error(*end_at, "'$' (or \\Z) is only supported at the end of the pattern");
      SY_ASSIGN_OR_RETURN(Parsed atom, ParseAtom(start_ok, depth));
      start_ok = false;
      if (atom.end_anchor)
        end_at = at;
      int32_t min = 0;
      int32_t max = 0;
      SY_ASSIGN_OR_RETURN(bool quantified, ParseQuantifier(&min, &max));
      if (!quantified) {
        if (atom.expr.kind == EbnfExpr::Kind::kLiteral && !items.empty() &&
            items.back().kind == EbnfExpr::Kind::kLiteral) {
          items.back().literal += atom.expr.literal;
        } else {
          items.push_back(std::move(atom.expr));
        }
        continue;
      }
      if (atom.end_anchor)
        return Error(at, "'$' inside a repeated group is not supported");
      items.push_back(EbnfExpr::Repeat(std::move(atom.expr), min, max));
    }
    const bool end_anchor = end_at.has_value();
    if (items.size() == 1)
      return Parsed{std::move(items[0]), end_anchor};
    return Parsed{EbnfExpr::Seq(std::move(items)), end_anchor};
  }

  // Whether a quantifier starts at `pos_` (without consuming it).
  absl::StatusOr<bool> AtQuantifier() {
    if (pos_ < p_.size() && IsQuantifierChar(p_[pos_]))
      return true;
    const size_t saved = pos_;
    int32_t min = 0;
    int32_t max = 0;
    SY_ASSIGN_OR_RETURN(bool counted, ParseCount(&min, &max));
    pos_ = saved;
    return counted;
  }

  // `{n}`, `{n,}`, `{,m}`, `{n,m}` or `{,}` at `pos_`: consumed when valid; anything else is
  // left alone (a literal '{').
  absl::StatusOr<bool> ParseCount(int32_t* min, int32_t* max) {
    if (!Peek('{'))
      return false;
    size_t at = pos_ + 1;
    const auto number = [&](std::optional<int64_t>* out) {
      int64_t n = 0;
      const size_t begin = at;
      while (at < p_.size() && p_[at] >= '0' && p_[at] <= '9') {
        n = std::min<int64_t>(n * 10 + (p_[at] - '0'), int64_t{kMaxEbnfRepeat} + 1);
        ++at;
      }
      if (at > begin)
        *out = n;
    };
    std::optional<int64_t> lo;
    std::optional<int64_t> hi;
    number(&lo);
    const bool comma = PeekAt(at, ',');
    if (comma) {
      ++at;
      number(&hi);
    } else {
      if (!lo.has_value())
        return false;
      hi = lo;
    }
    if (!PeekAt(at, '}'))
      return false;
    for (const auto& n : {lo, hi}) {
      if (n.has_value() && *n > kMaxEbnfRepeat) {
        return Error(pos_,
                     fmt::format("repetition counts above {} are not supported", kMaxEbnfRepeat));
      }
    }
    if (lo.has_value() && hi.has_value() && *hi < *lo)
      return Error(pos_, "min repeat greater than max repeat");
    *min = static_cast<int32_t>(lo.value_or(0));
    *max = hi.has_value() ? static_cast<int32_t>(*hi) : -1;
    pos_ = at + 1;
    return true;
  }

  // A quantifier (and its lazy mark) after an atom, if any.
  absl::StatusOr<bool> ParseQuantifier(int32_t* min, int32_t* max) {
    const size_t at = pos_;
    if (Peek('*') || Peek('+') || Peek('?')) {
      const char c = p_[pos_++];
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
    } else {
      SY_ASSIGN_OR_RETURN(bool counted, ParseCount(min, max));
      if (!counted)
        return false;
    }
    if (Peek('?')) {
      ++pos_;  // lazy: the same language under a full match
    } else if (Peek('+')) {
      return Error(pos_, "possessive quantifiers are not supported");
    }
    SY_ASSIGN_OR_RETURN(bool again, AtQuantifier());
    if (again)
      return Error(at, "multiple repeat");
    return true;
  }

  absl::StatusOr<Parsed> ParseAtom(bool at_start, int depth) {
    const size_t at = pos_;
    const char c = p_[pos_];
    if (c == '(')
      return ParseGroup(at_start, depth);
    if (c == '[') {
      SY_ASSIGN_OR_RETURN(std::vector<CodeRange> ranges, ParseClass());
      return Parsed{EbnfExpr::Class(std::move(ranges)), false};
    }
    if (c == '.') {
      ++pos_;
      return Parsed{EbnfExpr::Class(ComplementClass(std::vector<CodeRange>{{'\n', '\n'}})), false};
    }
    if (IsQuantifierChar(c))
      return Error(at, "nothing to repeat");
    if (c == '{') {
      SY_ASSIGN_OR_RETURN(bool counted, AtQuantifier());
      if (counted)
        return Error(at, "nothing to repeat");
    }
    if (c == '\\') {
      SY_ASSIGN_OR_RETURN(Escape e, ParseEscape(false));
      if (e.ranges.has_value())
        return Parsed{EbnfExpr::Class(std::move(*e.ranges)), false};
      SY_ASSIGN_OR_RETURN(std::string text, Encode(e.code_point, at));
      return Parsed{EbnfExpr::Literal(std::move(text)), false};
    }
    SY_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
    std::string text;
    base::AppendUtf8(cp, &text);
    return Parsed{EbnfExpr::Literal(std::move(text)), false};
  }

  absl::StatusOr<std::string> Encode(uint32_t cp, size_t at) const {
    if (cp >= 0xD800 && cp <= 0xDFFF)
      return Error(at, "a surrogate code point cannot be written as UTF-8");
    std::string text;
    base::AppendUtf8(cp, &text);
    return text;
  }

  // One UTF-8 character of the pattern itself.
  absl::StatusOr<uint32_t> ParseChar() {
    const base::Utf8Decoded d = base::DecodeUtf8(p_.substr(pos_));
    if (!d.valid)
      return Error(pos_, "invalid UTF-8");
    pos_ += d.length;
    return d.code_point;
  }

  absl::StatusOr<Parsed> ParseGroup(bool at_start, int depth) {
    const size_t at = pos_;
    if (depth + 1 > kMaxEbnfNesting)
      return Error(at, fmt::format("groups nest more than {} deep", kMaxEbnfNesting));
    ++pos_;
    if (Peek('?')) {
      ++pos_;
      const std::string_view rest = p_.substr(pos_);
      const auto unsupported = [&](std::string_view what) {
        return Error(at, fmt::format("{} is not supported", what));
      };
      if (rest.starts_with(":")) {
        ++pos_;
      } else if (rest.starts_with("P<") ||
                 (rest.starts_with("<") && !rest.starts_with("<=") && !rest.starts_with("<!"))) {
        const size_t close = p_.find('>', pos_);
        const size_t name = pos_ + (rest[0] == 'P' ? 2 : 1);
        if (close == std::string_view::npos || close == name ||
            p_.substr(name, close - name).find_first_of("()") != std::string_view::npos) {
          return Error(at, "bad group name");
        }
        pos_ = close + 1;
      } else if (rest.starts_with("P=")) {
        return unsupported("a backreference (?P=name)");
      } else if (rest.starts_with("=") || rest.starts_with("!")) {
        return unsupported("lookahead (?= or (?!");
      } else if (rest.starts_with("<=") || rest.starts_with("<!")) {
        return unsupported("lookbehind (?<= or (?<!");
      } else if (rest.starts_with("#")) {
        const size_t close = p_.find(')', pos_);
        if (close == std::string_view::npos)
          return Error(at, "missing ), unterminated comment");
        pos_ = close + 1;
        return Parsed{EbnfExpr::Seq({}), false};
      } else if (rest.starts_with("(")) {
        return unsupported("a conditional group (?(");
      } else if (rest.starts_with(">")) {
        return unsupported("an atomic group (?>");
      } else if (!rest.empty() &&
                 std::string_view("aiLmsux-").find(rest[0]) != std::string_view::npos) {
        return unsupported("inline flags such as (?i)");
      } else {
        return Error(at, "unknown extension after '(?'");
      }
    }
    SY_ASSIGN_OR_RETURN(Parsed inner, ParseAlt(at_start, depth + 1));
    if (!Peek(')'))
      return Error(at, "missing ), unterminated subpattern");
    ++pos_;
    return inner;
  }

  // `\` at `pos_`.
  absl::StatusOr<Escape> ParseEscape(bool in_class) {
    const size_t at = pos_;
    ++pos_;
    if (pos_ >= p_.size())
      return Error(at, "bad escape (end of pattern)");
    const char c = p_[pos_++];
    const auto code = [](uint32_t cp) { return Escape{cp, std::nullopt}; };
    const auto hex = [&](size_t digits) -> absl::StatusOr<Escape> {
      const std::optional<uint32_t> cp = ParseHexDigits(p_.substr(pos_), digits);
      if (!cp.has_value())
        return Error(at, fmt::format("incomplete escape \\{}", c));
      if (*cp > kMaxCodePoint)
        return Error(at, "bad escape: code point above U+10FFFF");
      pos_ += digits;
      return code(*cp);
    };
    const auto octal = [&](uint32_t cp, size_t more) -> absl::StatusOr<Escape> {
      for (size_t i = 0; i < more && pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '7'; ++i)
        cp = cp * 8 + static_cast<uint32_t>(p_[pos_++] - '0');
      if (cp > 0377)
        return Error(at, "octal escape value outside of range 0-0o377");
      return code(cp);
    };
    switch (c) {
      case 'n':
        return code('\n');
      case 't':
        return code('\t');
      case 'r':
        return code('\r');
      case 'f':
        return code('\f');
      case 'v':
        return code('\v');
      case 'a':
        return code('\a');
      case 'b':
        if (in_class)
          return code('\b');
        return Error(at, "word boundaries (\\b) are not supported");
      case 'B':
        return Error(at, "word boundaries (\\B) are not supported");
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S':
        return Escape{0, ShorthandClass(c)};
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      case 'N':
        return Error(at, "named character escapes (\\N{...}) are not supported");
      case 'p':
      case 'P':
        return Error(at, "Unicode property escapes (\\p{...}) are not supported");
      case '0':
        return octal(0, 2);
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      if (c <= '7' && pos_ + 1 < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '7' &&
          p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '7') {
        return octal(static_cast<uint32_t>(c - '0'), 2);
      }
      return Error(at, "backreferences are not supported");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return Error(at, fmt::format("bad escape \\{}", c));
    --pos_;
    SY_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
    return code(cp);
  }

  // `[` at `pos_`; the class's code points, normalized.
  absl::StatusOr<std::vector<CodeRange>> ParseClass() {
    const size_t at = pos_;
    ++pos_;
    const bool negate = Peek('^');
    if (negate)
      ++pos_;
    std::vector<CodeRange> ranges;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size())
        return Error(at, "unterminated character set");
      if (Peek(']') && !first) {
        ++pos_;
        break;
      }
      first = false;
      const size_t item_at = pos_;
      SY_ASSIGN_OR_RETURN(Escape lo, ParseClassItem());
      const bool range = Peek('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']';
      if (lo.ranges.has_value()) {
        if (range)
          return Error(item_at, "bad character range");
        ranges.insert(ranges.end(), lo.ranges->begin(), lo.ranges->end());
        continue;
      }
      if (!range) {
        ranges.push_back({lo.code_point, lo.code_point});
        continue;
      }
      ++pos_;
      SY_ASSIGN_OR_RETURN(Escape hi, ParseClassItem());
      if (hi.ranges.has_value() || hi.code_point < lo.code_point)
        return Error(item_at, "bad character range");
      ranges.push_back({lo.code_point, hi.code_point});
    }
    ranges = NormalizeClass(std::move(ranges));
    if (negate)
      ranges = ComplementClass(ranges);
    if (ranges.empty())
      return Error(at, "the character class matches nothing");
    return ranges;
  }

  absl::StatusOr<Escape> ParseClassItem() {
    if (Peek('\\')) {
      const size_t at = pos_;
      if (pos_ + 1 < p_.size() &&
          std::string_view("AZz").find(p_[pos_ + 1]) != std::string_view::npos)
        return Error(at, fmt::format("bad escape \\{} in a character class", p_[pos_ + 1]));
      return ParseEscape(true);
    }
    SY_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
    return Escape{cp, std::nullopt};
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileRegex(std::string_view pattern) {
  SY_ASSIGN_OR_RETURN(EbnfExpr body, RegexParser(pattern).Parse());
  EbnfGrammar g;
  g.rules.push_back({"regex", std::move(body)});
  return CompileEbnf(g);
}

}  // namespace switchyard::structured
