// Arbitrary bytes as a structural-tag specification: compile, and if it compiles, walk a
// matcher over a few texts (the input itself and fixed ones that contain common triggers).
// Must never crash or hang: the specification's size, the structures, the triggers and the
// grammar are bounded, and the matcher's steps terminate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_walk.h"
#include "structured/structural_tag_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::structured::CompileStructuralTag;
  std::string_view spec(reinterpret_cast<const char*>(data), size);
  auto grammar = CompileStructuralTag(spec);
  if (!grammar.ok())
    return 0;
  switchyard::structured::WalkTexts(
      *grammar,
      {spec, std::string_view("text <function=f>{\"a\": [1, 2.5, \"x\"]}</function> more"),
       std::string_view("<<<tool_call>>>{}</tool_call> \xC3\xA9 <a>true</a>")});
  return 0;
}
