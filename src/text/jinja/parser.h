// Jinja parser: tokens to a syntax tree, with Jinja's grammar and operator precedence
// (loopcontrols and the transformers {% generation %} tag included). Pure function;
// thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

#include "text/jinja/ast.h"

namespace switchyard::text::jinja {

// Parses template source. Syntax errors name the line.
absl::StatusOr<Body> Parse(std::string_view source);

}  // namespace switchyard::text::jinja
