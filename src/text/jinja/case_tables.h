// Python's Unicode case data, generated into case_tables.cc by tools/gen_case_tables.py.
// Constant tables, safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace switchyard::text::jinja {

// Every `stride`-th code point from `first` to `last` maps to itself plus `delta`.
struct CaseRun {
  uint32_t first;
  uint32_t last;
  uint32_t stride;
  int32_t delta;
};

// A code point whose mapping is several code points (UTF-8), e.g. U+00DF upper is "SS".
struct CaseSpecial {
  uint32_t code_point;
  const char* utf8;
};

struct CodePointRange {
  uint32_t first;
  uint32_t last;
};

// Sorted by first code point; specials take precedence over runs.
extern const CaseRun kUpperRuns[];
extern const size_t kUpperRunCount;
extern const CaseSpecial kUpperSpecial[];
extern const size_t kUpperSpecialCount;
extern const CaseRun kLowerRuns[];
extern const size_t kLowerRunCount;
extern const CaseSpecial kLowerSpecial[];
extern const size_t kLowerSpecialCount;
extern const CaseRun kTitleRuns[];
extern const size_t kTitleRunCount;
extern const CaseSpecial kTitleSpecial[];
extern const size_t kTitleSpecialCount;

// Sorted, disjoint ranges.
extern const CodePointRange kCasedRanges[];
extern const size_t kCasedRangeCount;
extern const CodePointRange kCaseIgnorableRanges[];
extern const size_t kCaseIgnorableRangeCount;
extern const CodePointRange kLowercaseRanges[];
extern const size_t kLowercaseRangeCount;
extern const CodePointRange kUppercaseRanges[];
extern const size_t kUppercaseRangeCount;
extern const CodePointRange kTitlecaseRanges[];
extern const size_t kTitlecaseRangeCount;

}  // namespace switchyard::text::jinja
