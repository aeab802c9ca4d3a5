// Arbitrary bytes as a JSON schema: compile, and if it compiles, walk a matcher over a few
// texts (the input itself and some fixed JSON). Must never crash or hang: every unrolled count
// and the grammar's size are bounded, and the matcher's steps always terminate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_walk.h"
#include "structured/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::structured::CompileJsonSchema;
  std::string_view schema(reinterpret_cast<const char*>(data), size);
  auto grammar = CompileJsonSchema(schema);
  if (!grammar.ok())
    return 0;
  switchyard::structured::WalkTexts(
      *grammar, {schema, std::string_view(R"({"a":[1,"x",{"b":null}],"c":true})"),
                 std::string_view(R"([{"v":1,"next":null},"s",-2.5e3,false])")});
  return 0;
}
