// Hand-written matchers for the split regexes of the byte-level BPE families (GPT-2,
// Llama-3, Qwen2; the patterns in text/internal/byte_level.h). They return exactly the
// matches that PCRE2 finds for those patterns (tests compare the two on every code point and
// on random text) at a fraction of the cost, since pre-tokenization dominates encoding when
// most words hit the BPE cache. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "text/internal/byte_ranges.h"

namespace switchyard::text::internal {

enum class KnownSplitPattern { kGpt2, kLlama3, kQwen2 };

// The known pattern whose text is exactly `pattern`, if any.
std::optional<KnownSplitPattern> RecognizeSplitPattern(std::string_view pattern);

// Appends the [begin, end) byte ranges of the successive matches of `kind` in `s` (valid
// UTF-8). These patterns match at every position, so the ranges tile `s`.
void FindKnownSplits(KnownSplitPattern kind, std::string_view s, ByteRanges* matches);

}  // namespace switchyard::text::internal
