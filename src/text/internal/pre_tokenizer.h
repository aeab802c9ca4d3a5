// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalized text into words that
// the model encodes independently. Immutable after construction; Apply may be called from
// any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json_fields.h"
#include "text/internal/byte_ranges.h"

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
  // True when every piece Apply makes is an unchanged substring of its input (nothing is
  // added, replaced or mapped), so that Cut may stand for Apply. Split, Digits,
  // Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit, a
  // ByteLevel that adds no prefix space and defers its mapping, and Sequences of these.
  virtual bool OnlyCuts() const { return false; }
  // Replaces `ranges` (non-empty ranges of `text`, in order) by the ranges of the pieces
  // Apply would make of them: Apply without copying text. REQUIRES: OnlyCuts().
  virtual absl::Status Cut(std::string_view text, ByteRanges* ranges) const;
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
                                                                const base::JsonPath& at,
                                                                bool defer_byte_mapping);

// Byte-level splitting by `pattern` (Isolated) with the byte mapping deferred to the model;
// for FromVocab.
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelSplit(std::string_view pattern);

}  // namespace switchyard::text::internal
