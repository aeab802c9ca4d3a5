// Character classes over Unicode code points, for the regex and GBNF compilers: sets of
// code-point ranges (union, complement) and their emission into a GrammarBuilder as the
// well-formed UTF-8 byte sequences that encode them. Surrogates (U+D800..U+DFFF) have no
// UTF-8 encoding and are never part of a class. Stateless functions; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "structured/grammar.h"

namespace switchyard::structured {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodeRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

// Sorted, merged (no two ranges overlap or touch), surrogates removed. REQUIRES: lo <= hi
// and hi <= kMaxCodePoint for each range.
std::vector<CodeRange> NormalizeClass(std::vector<CodeRange> ranges);

// Every code point not in `ranges` (normalized), surrogates excluded.
std::vector<CodeRange> ComplementClass(std::span<const CodeRange> ranges);

// The class of a shorthand escape, with its ASCII meaning: 'd' [0-9], 'w' [A-Za-z0-9_],
// 's' [ \t\n\r\f\v]; 'D', 'W' and 'S' their complements. REQUIRES: `c` is one of those six.
std::vector<CodeRange> ShorthandClass(char c);

// Byte edges (and the states they need) from `from` to `to` spelling the UTF-8 encoding of
// exactly the code points in `ranges` (normalized). An empty class adds nothing.
void AddClass(GrammarBuilder* b, std::span<const CodeRange> ranges, int32_t from, int32_t to);

// Whether AddClass adds no state for `ranges`: every code point is ASCII.
inline bool IsAsciiClass(std::span<const CodeRange> ranges) {
  return ranges.empty() || ranges.back().hi < 0x80;
}

}  // namespace switchyard::structured
