// Regex compiler: turns a regular expression, in the dialect of vLLM's
// structured_outputs.regex (Python `re` syntax, matched against the whole output as
// re.fullmatch does), into a Grammar whose sentences are the UTF-8 texts the regex matches.
//
// Supported: literal characters (any UTF-8), escapes (\n \t \r \f \v \a \0 and octal \ooo,
// \xHH, \uHHHH, \UHHHHHHHH, an escaped non-alphanumeric character stands for itself), `.`
// (any code point but newline), classes `[...]` and `[^...]` with ranges and escapes (\b is
// backspace inside a class), the shorthands \d \w \s \D \W \S, groups `(...)`, `(?:...)`,
// `(?P<name>...)` and `(?<name>...)`, comments `(?#...)`, alternation, the quantifiers
// * + ? {n} {n,} {,m} {n,m} and their lazy forms (the same language for a full match), and
// `^` / `\A` at the start and `$` / `\Z` / `\z` at the end (accepted, no effect).
// The shorthands have their ASCII meaning, as under re.ASCII: \d is [0-9], \w is
// [A-Za-z0-9_], \s is [ \t\n\r\f\v], and \D \W \S are their complements over all code points.
// A `{` that does not open a valid count is a literal, as in Python.
//
// Refused with InvalidArgument naming the construct and its byte offset: backreferences,
// lookahead and lookbehind, word boundaries (\b \B), conditionals, atomic groups, possessive
// quantifiers, inline flags such as (?i), \N{...} and \p{...}, anchors elsewhere than at the
// ends, classes that match nothing, surrogate code points, invalid UTF-8, malformed syntax,
// and input past the limits in ebnf.h (text size, group nesting, repetition counts) or
// GrammarBuilder's. Stateless; any thread.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

#include "structured/grammar.h"

namespace switchyard::structured {

absl::StatusOr<std::shared_ptr<const Grammar>> CompileRegex(std::string_view pattern);

}  // namespace switchyard::structured
