// Jinja lexer with transformers' settings (trim_blocks and lstrip_blocks on): turns template
// source into data, tag-delimiter and expression tokens. Whitespace control ("{%-", "-%}",
// "{%+") and raw blocks are resolved here, so the parser sees final data text. Pure
// function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::text::jinja {

enum class TokenType {
  kData,        // Literal template text.
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value.
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  int line;
};

// Tokenizes `source`; errors name the line.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace switchyard::text::jinja
