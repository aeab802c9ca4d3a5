// Arbitrary bytes as tokenizer.json: loading must fail cleanly or succeed, never crash;
// a tokenizer that loads must encode and decode a fixed text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tokenizer = switchyard::text::Tokenizer::FromJson(json, "fuzz.json");
  if (!tokenizer.ok())
    return 0;
  auto ids = (*tokenizer)->Encode("Hello wörld <s> 123 \xff 😀", true);
  if (ids.ok())
    (*tokenizer)->Decode(*ids, false);
  return 0;
}
