// Normalizers of tokenizer.json ("normalizer"): text -> text transforms applied to each
// piece of input between added tokens, before pre-tokenization. Immutable after
// construction; Normalize may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json_fields.h"

namespace switchyard::text::internal {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string_view s) const = 0;
};

// Builds one from its JSON object: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// Prepend, Replace (String or Regex pattern).
absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(simdjson::dom::element json,
                                                            const base::JsonPath& at);

// Prepends `prefix` to non-empty text (used by FromVocab for SentencePiece vocabularies).
std::unique_ptr<Normalizer> MakePrependNormalizer(std::string prefix);
// Replaces every occurrence of the literal `from` by `to`.
std::unique_ptr<Normalizer> MakeReplaceNormalizer(std::string from, std::string to);
std::unique_ptr<Normalizer> MakeNfcNormalizer();
std::unique_ptr<Normalizer> MakeSequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> items);

}  // namespace switchyard::text::internal
