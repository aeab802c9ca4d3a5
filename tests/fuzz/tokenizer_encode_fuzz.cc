// Arbitrary bytes encoded by two small fixed tokenizers (byte-level and SentencePiece-style
// with byte fallback), then decoded and streamed: must never crash, and byte-level decoding
// must give back the (UTF-8-repaired) input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "../unit/text/tokenizer_test_util.h"
#include "base/utf8.h"
#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"

namespace {

const switchyard::text::Tokenizer& ByteLevel() {
  static auto* t =
      switchyard::text::Tokenizer::FromJson(switchyard::text::testing::ByteLevelJson(), "bl")
          ->release();
  return *t;
}

const switchyard::text::Tokenizer& SentencePiece() {
  static auto* t =
      switchyard::text::Tokenizer::FromJson(switchyard::text::testing::SentencePieceJson(), "spm")
          ->release();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto* t : {&ByteLevel(), &SentencePiece()}) {
    auto ids = t->Encode(text, true);
    if (!ids.ok())
      continue;
    std::string decoded = t->Decode(*ids, false);
    if (t == &ByteLevel() && decoded != switchyard::base::SanitizeUtf8(text))
      std::abort();
    switchyard::text::IncrementalDetokenizer detok(t, false);
    std::string streamed;
    for (int32_t id : *ids)
      streamed += detok.Push(id);
    streamed += detok.Flush();
    if (streamed != decoded)
      std::abort();
  }
  return 0;
}
