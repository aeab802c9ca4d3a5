// Decoders of tokenizer.json ("decoder"): turn token strings back into text. Each step
// rewrites the list of token strings (HF's decode_chain); the result is their
// concatenation. Immutable after construction; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json_fields.h"

namespace switchyard::text::internal {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
  // Rewrites one token string into the raw bytes it contributes in the middle of a decoded
  // sequence: no UTF-8 repair, no sequence-start rules (Strip, a Metaspace prefix). Byte
  // tokens give their byte. Structured output matches these bytes against a grammar.
  virtual void TokenBytes(std::string* token) const = 0;
};

// Builds one from its JSON object: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip,
// Metaspace, WordPiece, BPEDecoder.
absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(simdjson::dom::element json,
                                                      const base::JsonPath& at);

std::unique_ptr<Decoder> MakeByteLevelDecoder();
// Llama-2 style: Replace("▁", " "), ByteFallback, Fuse, and Strip(" ", 1, 0) when
// `strip_leading_space`.
std::unique_ptr<Decoder> MakeSentencePieceDecoder(bool strip_leading_space);

}  // namespace switchyard::text::internal
