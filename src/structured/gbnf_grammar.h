// GBNF compiler: turns a grammar in the EBNF form of vLLM's structured_outputs.grammar (as
// xgrammar reads it) and llama.cpp's GBNF into a Grammar with the same language over UTF-8.
//
// Syntax: rules `name ::= body`; `root` is the start rule. Names are letters, digits, '_'
// and '-' (as in llama.cpp; '.' is the any-character item). A body is alternatives separated
// by `|`, each a sequence of string literals "..." (escapes \n \r \t \\ \" \' \[ \] \- \^ \/
// \a \b \f \v \0 \xHH \uHHHH \UHHHHHHHH; any UTF-8), character classes [...] and [^...] (ranges,
// the same escapes, and \d \w \s \D \W \S with their ASCII meaning), `.` (any character), rule
// references and groups `( ... )`, each optionally followed by one of * + ? {m} {m,} {,n}
// {m,n}. Whitespace and newlines separate items anywhere; a rule ends where the next
// `name ::=` begins; `#` starts a comment to the end of the line. Rules may be recursive and
// may match the empty string.
//
// InvalidArgument, with the line and column, for syntax errors, unknown escapes, undefined
// or twice-defined rules, a missing root, classes that match nothing, left recursion (a rule
// that can reach itself before consuming anything), stacked repetition operators (`x*?`;
// use parentheses), xgrammar's lookahead assertions `(= ...)`, and input past the limits in
// ebnf.h or GrammarBuilder's. Stateless; any thread.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

#include "structured/grammar.h"

namespace switchyard::structured {

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(std::string_view text);

}  // namespace switchyard::structured
