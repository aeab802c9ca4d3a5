#include "text/internal/split_matcher.h"

#include <cstdint>

#include "text/internal/byte_level.h"
#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

// The three classes the patterns test: \p{L}, \p{N} and \s (Unicode White_Space, as the
// Regex wrapper rewrites \s); everything else is "other".
enum Class : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 4 };

constexpr uint8_t AsciiClass(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
    return kLetter;
  if (c >= '0' && c <= '9')
    return kNumber;
  if (c == ' ' || (c >= 0x09 && c <= 0x0D))
    return kSpace;
  return kOther;
}

struct AsciiTable {
  uint8_t cls[128];
  constexpr AsciiTable() : cls() {
    for (uint32_t c = 0; c < 128; ++c)
      cls[c] = AsciiClass(c);
  }
};
constexpr AsciiTable kAscii;

// One decoded code point: its value, class and the offset just past it.
struct Char {
  uint32_t cp;
  uint8_t cls;
  size_t next;
};

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  size_t size() const { return s_.size(); }

  Char At(size_t pos) const {
    auto lead = static_cast<unsigned char>(s_[pos]);
    if (lead < 0x80)
      return Char{lead, kAscii.cls[lead], pos + 1};
    size_t next = pos;
    uint32_t cp = NextCodePoint(s_, &next);
    uint8_t cls = kOther;
    if (IsWhitespace(cp)) {
      cls = kSpace;
    } else if (IsLetter(cp)) {
      cls = kLetter;
    } else if (IsNumber(cp)) {
      cls = kNumber;
    }
    return Char{cp, cls, next};
  }

  // The end of the run of characters of class `cls` starting at `pos`.
  size_t RunEnd(size_t pos, uint8_t cls) const {
    // Most runs are ASCII: one table load and compare per byte.
    while (pos < s_.size()) {
      auto byte = static_cast<unsigned char>(s_[pos]);
      if (byte < 0x80) {
        if (kAscii.cls[byte] != cls)
          break;
        ++pos;
        continue;
      }
      Char c = At(pos);
      if (c.cls != cls)
        break;
      pos = c.next;
    }
    return pos;
  }

  // The end of the run of characters of class `cls` starting at `pos`, at most `limit` long.
  size_t RunEnd(size_t pos, uint8_t cls, size_t limit) const {
    size_t count = 0;
    while (pos < s_.size() && count < limit) {
      Char c = At(pos);
      if (c.cls != cls)
        break;
      pos = c.next;
      ++count;
    }
    return pos;
  }

  bool IsNewline(size_t pos) const { return s_[pos] == '\r' || s_[pos] == '\n'; }

  // The end of `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (just past the apostrophe), or 0.
  // Case-insensitively, PCRE2 also folds U+017F (long s) to 's'.
  size_t ContractionEnd(size_t pos, bool caseless) const {
    if (pos >= s_.size())
      return 0;
    Char c1 = At(pos);
    uint32_t a = c1.cp;
    if (caseless) {
      if (a == 0x17F)
        return c1.next;
      if (a >= 'A' && a <= 'Z')
        a += 'a' - 'A';
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return c1.next;
    if (a != 'r' && a != 'v' && a != 'l')
      return 0;
    if (c1.next >= s_.size())
      return 0;
    uint32_t b = static_cast<unsigned char>(s_[c1.next]);
    if (caseless && b >= 'A' && b <= 'Z')
      b += 'a' - 'A';
    if ((a == 'l' && b == 'l') || (a != 'l' && b == 'e'))
      return c1.next + 1;
    return 0;
  }

  // `\s*[\r\n]+|\s+(?!\S)|\s+` at `pos`, which holds whitespace; `with_newline_run` enables
  // the first alternative (absent from GPT-2's pattern).
  size_t WhitespaceEnd(size_t pos, bool with_newline_run) const {
    size_t end = pos, last = pos, after_newline = 0;
    while (end < s_.size()) {
      Char c = At(end);
      if (c.cls != kSpace)
        break;
      if (c.cp == '\r' || c.cp == '\n')
        after_newline = c.next;
      last = end;
      end = c.next;
    }
    if (with_newline_run && after_newline != 0)
      return after_newline;
    // \s+(?!\S): the whole run at the end of the text, else all but its last character.
    if (end == s_.size() || last > pos)
      return end == s_.size() ? end : last;
    return end;
  }

 private:
  std::string_view s_;
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t Llama3MatchEnd(const Scanner& s, size_t pos, size_t max_digits) {
  Char c0 = s.At(pos);
  if (c0.cp == '\'') {
    if (size_t end = s.ContractionEnd(c0.next, true))
      return end;
  }
  if (c0.cls == kLetter)
    return s.RunEnd(c0.next, kLetter);
  if (c0.cls == kNumber)
    return s.RunEnd(c0.next, kNumber, max_digits - 1);
  // c0 is other or whitespace: an optional prefix of a letter run unless it is \r or \n.
  bool newline = c0.cp == '\r' || c0.cp == '\n';
  Char c1{0, kOther, 0};
  bool has_next = c0.next < s.size();
  if (has_next)
    c1 = s.At(c0.next);
  if (!newline && has_next && c1.cls == kLetter)
    return s.RunEnd(c1.next, kLetter);
  size_t other_start = SIZE_MAX;
  if (c0.cls == kOther) {
    other_start = pos;
  } else if (c0.cp == ' ' && has_next && c1.cls == kOther) {
    other_start = c0.next;
  }
  if (other_start != SIZE_MAX) {
    size_t end = s.RunEnd(other_start, kOther);
    while (end < s.size() && s.IsNewline(end))
      ++end;
    return end;
  }
  return s.WhitespaceEnd(pos, true);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t Gpt2MatchEnd(const Scanner& s, size_t pos) {
  Char c0 = s.At(pos);
  if (c0.cp == '\'') {
    if (size_t end = s.ContractionEnd(c0.next, false))
      return end;
  }
  if (c0.cls != kSpace)
    return s.RunEnd(c0.next, c0.cls);
  if (c0.cp == ' ' && c0.next < s.size()) {
    Char c1 = s.At(c0.next);
    if (c1.cls != kSpace)
      return s.RunEnd(c1.next, c1.cls);
  }
  return s.WhitespaceEnd(pos, false);
}

}  // namespace

std::optional<KnownSplitPattern> RecognizeSplitPattern(std::string_view pattern) {
  if (pattern == kGpt2Pattern)
    return KnownSplitPattern::kGpt2;
  if (pattern == kLlama3Pattern)
    return KnownSplitPattern::kLlama3;
  if (pattern == kQwen2Pattern)
    return KnownSplitPattern::kQwen2;
  return std::nullopt;
}

void FindKnownSplits(KnownSplitPattern kind, std::string_view s, ByteRanges* matches) {
  Scanner scanner(s);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = kind == KnownSplitPattern::kGpt2     ? Gpt2MatchEnd(scanner, pos)
                 : kind == KnownSplitPattern::kLlama3 ? Llama3MatchEnd(scanner, pos, 3)
                                                      : Llama3MatchEnd(scanner, pos, 1);
    matches->emplace_back(pos, end);
    pos = end;
  }
}

}  // namespace switchyard::text::internal
