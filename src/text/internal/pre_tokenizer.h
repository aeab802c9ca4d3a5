// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalized text into words that
// the model encodes independently. Immutable after construction; Apply may be called from
// any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simdjson.h"

#include "text/internal/json_fields.h"

namespace switchyard::text::internal {

struct Piece {
  std::string text;
  // True when the piece starts at offset 0 of the original input (HF's
  // `offsets_original().0 == 0`, which Metaspace's prepend_scheme "first" tests).
  bool at_origin = false;
};

// How a split keeps the delimiters it matched (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped.
  virtual absl::Status Apply(std::vector<Piece>* pieces) const = 0;
  // True for a ByteLevel pre-tokenizer whose byte -> character mapping was left to the
  // model (see ParsePreTokenizer).
  virtual bool DefersByteMapping() const { return false; }
};

// Builds one from its JSON object: Sequence, Split, ByteLevel, Metaspace, Digits,
// Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit. When
// `defer_byte_mapping` and the last step is ByteLevel, that step leaves words as raw bytes
// and DefersByteMapping() is true: the model maps bytes itself, which lets it cache by raw
// word.
absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(simdjson::dom::element json,
                                                                const JsonPath& at,
                                                                bool defer_byte_mapping);

// Byte-level splitting by `pattern` (Isolated) with the byte mapping deferred to the model;
// for FromVocab.
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelSplit(std::string_view pattern);

// Splits `s` by the match ranges (sorted, non-overlapping) with `behavior`; appends the
// non-empty results. Exposed for tests.
void SplitByMatches(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                    bool invert, SplitBehavior behavior, std::vector<Piece>* out);

}  // namespace switchyard::text::internal
