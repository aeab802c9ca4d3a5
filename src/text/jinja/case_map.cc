#include "text/jinja/case_map.h"

#include <algorithm>
#include <vector>

#include "base/utf8.h"
#include "text/jinja/case_tables.h"

namespace switchyard::text::jinja {
namespace {

constexpr uint32_t kCapitalSigma = 0x3a3;
constexpr uint32_t kFinalSigma = 0x3c2;

bool InRanges(const CodePointRange* ranges, size_t count, uint32_t cp) {
  const CodePointRange* end = ranges + count;
  const CodePointRange* it = std::upper_bound(
      ranges, end, cp, [](uint32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

struct CaseTable {
  const CaseRun* runs;
  size_t run_count;
  const CaseSpecial* special;
  size_t special_count;
};

const CaseTable kUpper = {kUpperRuns, kUpperRunCount, kUpperSpecial, kUpperSpecialCount};
const CaseTable kLower = {kLowerRuns, kLowerRunCount, kLowerSpecial, kLowerSpecialCount};
const CaseTable kTitle = {kTitleRuns, kTitleRunCount, kTitleSpecial, kTitleSpecialCount};

// Appends the mapping of `cp` under `table` to *out.
void AppendMapped(const CaseTable& table, uint32_t cp, std::string* out) {
  const CaseSpecial* send = table.special + table.special_count;
  const CaseSpecial* s = std::lower_bound(
      table.special, send, cp, [](const CaseSpecial& e, uint32_t c) { return e.code_point < c; });
  if (s != send && s->code_point == cp) {
    out->append(s->utf8);
    return;
  }
  const CaseRun* rend = table.runs + table.run_count;
  const CaseRun* r = std::upper_bound(table.runs, rend, cp,
                                      [](uint32_t c, const CaseRun& run) { return c < run.first; });
  if (r != table.runs) {
    --r;
    if (cp <= r->last && (cp - r->first) % r->stride == 0) {
      base::AppendUtf8(static_cast<uint32_t>(static_cast<int64_t>(cp) + r->delta), out);
      return;
    }
  }
  base::AppendUtf8(cp, out);
}

bool IsCaseIgnorable(uint32_t cp) {
  return InRanges(kCaseIgnorableRanges, kCaseIgnorableRangeCount, cp);
}

// A string decoded into code points; invalid bytes are kept as raw pieces.
struct Decoded {
  std::vector<uint32_t> cps;  // kInvalid for an invalid byte sequence.
  std::vector<std::string_view> raw;
  static constexpr uint32_t kInvalid = 0xffffffff;
};

Decoded Decode(std::string_view s) {
  Decoded d;
  while (!s.empty()) {
    base::Utf8Decoded u = base::DecodeUtf8(s);
    d.cps.push_back(u.valid ? u.code_point : Decoded::kInvalid);
    d.raw.push_back(s.substr(0, u.length));
    s.remove_prefix(u.length);
  }
  return d;
}

// CPython's Final_Sigma condition for the capital sigma at index i.
bool IsFinalSigma(const Decoded& d, size_t i) {
  size_t j = i;
  uint32_t c = 0;
  while (j > 0) {
    c = d.cps[j - 1];
    if (!IsCaseIgnorable(c))
      break;
    --j;
  }
  if (j == 0 || !IsCased(c))
    return false;
  for (size_t k = i + 1; k < d.cps.size(); ++k) {
    if (!IsCaseIgnorable(d.cps[k]))
      return !IsCased(d.cps[k]);
  }
  return true;
}

// Appends code point i of d lowercased, with the final-sigma rule in d's context.
void AppendLower(const Decoded& d, size_t i, std::string* out) {
  uint32_t cp = d.cps[i];
  if (cp == Decoded::kInvalid) {
    out->append(d.raw[i]);
  } else if (cp == kCapitalSigma) {
    base::AppendUtf8(IsFinalSigma(d, i) ? kFinalSigma : 0x3c3, out);
  } else {
    AppendMapped(kLower, cp, out);
  }
}

void AppendWith(const CaseTable& table, const Decoded& d, size_t i, std::string* out) {
  if (d.cps[i] == Decoded::kInvalid) {
    out->append(d.raw[i]);
  } else {
    AppendMapped(table, d.cps[i], out);
  }
}

}  // namespace

bool IsCased(uint32_t cp) {
  return InRanges(kCasedRanges, kCasedRangeCount, cp);
}
bool IsLowercase(uint32_t cp) {
  return InRanges(kLowercaseRanges, kLowercaseRangeCount, cp);
}
bool IsUppercase(uint32_t cp) {
  return InRanges(kUppercaseRanges, kUppercaseRangeCount, cp);
}
bool IsTitlecase(uint32_t cp) {
  return InRanges(kTitlecaseRanges, kTitlecaseRangeCount, cp);
}

std::string ToUpper(std::string_view s) {
  Decoded d = Decode(s);
  std::string out;
  for (size_t i = 0; i < d.cps.size(); ++i)
    AppendWith(kUpper, d, i, &out);
  return out;
}

std::string ToLower(std::string_view s) {
  Decoded d = Decode(s);
  std::string out;
  for (size_t i = 0; i < d.cps.size(); ++i)
    AppendLower(d, i, &out);
  return out;
}

std::string Capitalize(std::string_view s) {
  Decoded d = Decode(s);
  std::string out;
  for (size_t i = 0; i < d.cps.size(); ++i) {
    if (i == 0) {
      AppendWith(kTitle, d, i, &out);
    } else {
      AppendLower(d, i, &out);
    }
  }
  return out;
}

std::string Title(std::string_view s) {
  Decoded d = Decode(s);
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < d.cps.size(); ++i) {
    if (previous_cased) {
      AppendLower(d, i, &out);
    } else {
      AppendWith(kTitle, d, i, &out);
    }
    previous_cased = d.cps[i] != Decoded::kInvalid && IsCased(d.cps[i]);
  }
  return out;
}

}  // namespace switchyard::text::jinja
