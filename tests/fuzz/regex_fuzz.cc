// Arbitrary bytes as a regex: compile, and if it compiles, walk a matcher over a few texts
// (the input itself and some fixed ones). Must never crash or hang: the text, group nesting,
// repetition counts and the grammar's size are bounded, and the matcher's steps terminate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_walk.h"
#include "structured/regex_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::structured::CompileRegex;
  std::string_view pattern(reinterpret_cast<const char*>(data), size);
  auto grammar = CompileRegex(pattern);
  if (!grammar.ok())
    return 0;
  switchyard::structured::WalkTexts(
      *grammar, {pattern, std::string_view("555-1234 abc_DEF\n\t{}"),
                 std::string_view("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80 aaaa")});
  return 0;
}
