#include "text/jinja/parser.h"

#include "text/jinja/parser_internal.h"

namespace switchyard::text::jinja {

absl::StatusOr<Body> Parser::ParseTemplate() {
  Body body;
  std::string end;
  auto st = ParseBody({}, &body, &end);
  if (!st.ok())
    return st;
  return body;
}

std::string Parser::Describe(const Token& t) const {
  switch (t.type) {
    case TokenType::kEof:
      return "end of template";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kData:
      return "template data";
    default:
      return fmt::format("'{}'", t.text);
  }
}

absl::Status Parser::Expect(std::string_view op) {
  if (SkipOp(op))
    return absl::OkStatus();
  return Error(fmt::format("expected '{}', got {}", op, Describe(Cur())));
}

absl::Status Parser::ExpectBlockEnd() {
  if (Cur().type == TokenType::kBlockEnd) {
    Next();
    return absl::OkStatus();
  }
  return Error(fmt::format("expected end of statement block, got {}", Describe(Cur())));
}

absl::StatusOr<std::string> Parser::ExpectName() {
  if (Cur().type != TokenType::kName) {
    return Error(fmt::format("expected a name, got {}", Describe(Cur())));
  }
  std::string name = Cur().text;
  Next();
  return name;
}

absl::StatusOr<Body> Parse(std::string_view source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok())
    return tokens.status();
  return Parser(*std::move(tokens)).ParseTemplate();
}

}  // namespace switchyard::text::jinja
