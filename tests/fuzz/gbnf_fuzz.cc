// Arbitrary bytes as a GBNF grammar: compile, and if it compiles, walk a matcher over a few
// texts (the input itself and some fixed ones). Must never crash or hang: the text, group
// nesting, repetition counts and the grammar's size are bounded, the analyses are iterative,
// left recursion is refused, and the matcher's steps terminate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_walk.h"
#include "structured/gbnf_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::structured::CompileGbnf;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto grammar = CompileGbnf(text);
  if (!grammar.ok())
    return 0;
  switchyard::structured::WalkTexts(*grammar, {text, std::string_view("(1+2)*3 abc, def"),
                                               std::string_view("{\"a\": [1, \"x\"]}\n\xC3\xA9")});
  return 0;
}
