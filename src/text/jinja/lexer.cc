#include "text/jinja/lexer.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "fmt/format.h"

#include "base/utf8.h"

namespace switchyard::text::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

constexpr std::array<std::string_view, 26> kOperators = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
    ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}", ";"};

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      auto st = LexData();
      if (!st.ok())
        return st;
    }
    tokens_.push_back({TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  absl::Status Error(std::string_view msg, int line) const {
    return absl::InvalidArgumentError(
        fmt::format("template syntax error (line {}): {}", line, msg));
  }

  // Moves pos_ to `to`, counting lines and remembering whether the text ended a line.
  void Advance(size_t to) {
    for (size_t i = pos_; i < to; ++i) {
      if (src_[i] == '\n')
        ++line_;
    }
    if (to > pos_)
      line_starting_ = src_[to - 1] == '\n';
    pos_ = to;
  }

  void EmitData(std::string_view text, int line) {
    if (!text.empty())
      tokens_.push_back({TokenType::kData, std::string(text), line});
  }

  // Strips what lstrip_blocks removes before a tag: spaces and tabs back to a line start.
  std::string_view LStrip(std::string_view text) const {
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
    if (l_pos == 0 && !line_starting_)
      return text;
    for (size_t i = l_pos; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t')
        return text;
    }
    return text.substr(0, l_pos);
  }

  static std::string_view RStrip(std::string_view text) {
    while (!text.empty() && IsSpace(text.back()))
      text.remove_suffix(1);
    return text;
  }

  // Consumes the text after a tag's closing delimiter: all whitespace after "-", one
  // newline after a block or comment end (trim_blocks) unless "+" precedes it.
  void AfterTagEnd(char modifier, bool trim_newline) {
    if (modifier == '-') {
      size_t p = pos_;
      while (p < src_.size() && IsSpace(src_[p]))
        ++p;
      Advance(p);
    } else if (modifier != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      Advance(pos_ + 1);
    }
  }

  absl::Status LexData() {
    size_t open = pos_;
    while (true) {
      open = src_.find('{', open);
      if (open == std::string_view::npos || open + 1 >= src_.size()) {
        EmitData(src_.substr(pos_), line_);
        Advance(src_.size());
        return absl::OkStatus();
      }
      char next = src_[open + 1];
      if (next == '{' || next == '%' || next == '#')
        break;
      ++open;
    }
    char kind = src_[open + 1];
    char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
    std::string_view text = src_.substr(pos_, open - pos_);
    if (modifier == '-') {
      text = RStrip(text);
    } else if (modifier != '+' && kind != '{') {
      text = LStrip(text);
    }
    int data_line = line_;
    // Raw blocks keep their content verbatim.
    if (kind == '%' && IsRawBegin(open)) {
      EmitData(text, data_line);
      return LexRaw(open);
    }
    EmitData(text, data_line);
    size_t body = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
    Advance(body);
    if (kind == '#')
      return LexComment();
    return LexTag(kind == '{');
  }

  bool IsRawBegin(size_t open) const {
    size_t p = open + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+'))
      ++p;
    while (p < src_.size() && IsSpace(src_[p]))
      ++p;
    if (src_.substr(p, 3) != "raw")
      return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p]))
      ++p;
    return src_.substr(p, 2) == "%}" || src_.substr(p, 3) == "-%}";
  }

  absl::Status LexRaw(size_t open) {
    int start_line = line_;
    size_t p = src_.find("raw", open) + 3;
    while (IsSpace(src_[p]))
      ++p;
    bool strip_after = src_[p] == '-';
    Advance(p + (strip_after ? 3 : 2));
    if (strip_after)
      AfterTagEnd('-', false);
    // Find {%[-+]? endraw [-+]?%}.
    size_t search = pos_;
    while (true) {
      size_t tag = src_.find("{%", search);
      if (tag == std::string_view::npos)
        return Error("missing endraw for raw block", start_line);
      size_t q = tag + 2;
      char modifier = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+'))
        modifier = src_[q++];
      while (q < src_.size() && IsSpace(src_[q]))
        ++q;
      if (src_.substr(q, 6) != "endraw") {
        search = tag + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsSpace(src_[q]))
        ++q;
      char end_modifier = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+'))
        end_modifier = src_[q++];
      if (src_.substr(q, 2) != "%}") {
        search = tag + 2;
        continue;
      }
      std::string_view content = src_.substr(pos_, tag - pos_);
      if (modifier == '-')
        content = RStrip(content);
      EmitData(content, line_);
      Advance(q + 2);
      AfterTagEnd(end_modifier, true);
      return absl::OkStatus();
    }
  }

  absl::Status LexComment() {
    int start_line = line_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos)
      return Error("missing end of comment tag", start_line);
    char modifier = end > pos_ ? src_[end - 1] : '\0';
    Advance(end + 2);
    AfterTagEnd(modifier, true);
    return absl::OkStatus();
  }

  absl::Status LexTag(bool is_var) {
    int start_line = line_;
    tokens_.push_back({is_var ? TokenType::kVarBegin : TokenType::kBlockBegin, "", line_});
    std::vector<char> brackets;
    std::string_view close = is_var ? "}}" : "%}";
    while (true) {
      size_t p = pos_;
      while (p < src_.size() && IsSpace(src_[p]))
        ++p;
      Advance(p);
      if (pos_ >= src_.size()) {
        return Error(is_var ? "unexpected end of template, expected '}}'"
                            : "unexpected end of template, expected '%}'",
                     start_line);
      }
      if (brackets.empty()) {
        char modifier = src_[pos_];
        if ((modifier == '-' || modifier == '+') && src_.substr(pos_ + 1, 2) == close) {
          tokens_.push_back({is_var ? TokenType::kVarEnd : TokenType::kBlockEnd, "", line_});
          Advance(pos_ + 3);
          AfterTagEnd(modifier, !is_var);
          return absl::OkStatus();
        }
        if (src_.substr(pos_, 2) == close) {
          tokens_.push_back({is_var ? TokenType::kVarEnd : TokenType::kBlockEnd, "", line_});
          Advance(pos_ + 2);
          AfterTagEnd('\0', !is_var);
          return absl::OkStatus();
        }
      }
      auto st = LexToken(&brackets);
      if (!st.ok())
        return st;
    }
  }

  absl::Status LexToken(std::vector<char>* brackets) {
    char c = src_[pos_];
    int line = line_;
    if (IsNameStart(c)) {
      size_t p = pos_;
      while (p < src_.size() && IsNameChar(src_[p]))
        ++p;
      tokens_.push_back({TokenType::kName, std::string(src_.substr(pos_, p - pos_)), line});
      Advance(p);
      return absl::OkStatus();
    }
    if (c == '\'' || c == '"')
      return LexString(c);
    if (std::isdigit(static_cast<unsigned char>(c)))
      return LexNumber();
    for (std::string_view op : kOperators) {
      if (src_.substr(pos_, op.size()) != op)
        continue;
      if (op == "(" || op == "[" || op == "{") {
        brackets->push_back(op[0]);
      } else if (op == ")" || op == "]" || op == "}") {
        char want = op == ")" ? '(' : op == "]" ? '[' : '{';
        if (brackets->empty())
          return Error(fmt::format("unexpected '{}'", op), line);
        if (brackets->back() != want) {
          return Error(
              fmt::format("unexpected '{}', expected closing of '{}'", op, brackets->back()), line);
        }
        brackets->pop_back();
      }
      tokens_.push_back({TokenType::kOperator, std::string(op), line});
      Advance(pos_ + op.size());
      return absl::OkStatus();
    }
    return Error(fmt::format("unexpected char '{}'", c), line);
  }

  absl::Status LexNumber() {
    int line = line_;
    size_t p = pos_;
    auto digits = [&] {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
    };
    digits();
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      is_float = true;
      ++p;
      digits();
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-'))
        ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        p = q;
        digits();
      }
    }
    std::string text;
    for (char ch : src_.substr(pos_, p - pos_)) {
      if (ch != '_')
        text += ch;
    }
    tokens_.push_back({is_float ? TokenType::kFloat : TokenType::kInteger, text, line});
    Advance(p);
    return absl::OkStatus();
  }

  absl::Status LexString(char quote) {
    int line = line_;
    size_t p = pos_ + 1;
    std::string value;
    while (true) {
      if (p >= src_.size())
        return Error("unterminated string literal", line);
      char c = src_[p];
      if (c == quote)
        break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size())
        return Error("unterminated string literal", line);
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          value += e;
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (p + n > src_.size())
            return Error("truncated \\x/\\u escape in string", line);
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            char h = src_[p + i];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              return Error("truncated \\x/\\u escape in string", line);
            }
            cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h))
                                ? h - '0'
                                : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          }
          if (cp > 0x10ffff)
            return Error("illegal Unicode character in string escape", line);
          p += n;
          base::AppendUtf8(cp, &value);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i) {
              cp = cp * 8 + (src_[p++] - '0');
            }
            base::AppendUtf8(cp, &value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    // Lines inside the literal still count.
    tokens_.push_back({TokenType::kString, std::move(value), line});
    Advance(p + 1);
    return absl::OkStatus();
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  // Jinja drops one trailing newline (keep_trailing_newline is off).
  if (source.size() >= 2 && source.substr(source.size() - 2) == "\r\n") {
    source.remove_suffix(2);
  } else if (!source.empty() && (source.back() == '\n' || source.back() == '\r')) {
    source.remove_suffix(1);
  }
  return Lexer(source).Run();
}

}  // namespace switchyard::text::jinja
