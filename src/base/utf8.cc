#include "base/utf8.h"

#include <cstdint>
#include <cstring>

namespace switchyard::base {

Utf8Decoded DecodeUtf8(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80)
    return {b0, 1, true};
  size_t need;
  uint32_t cp;
  // The allowed range of the second byte depends on the first (no overlongs, no
  // surrogates, nothing above U+10FFFF).
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0)
      lo = 0xA0;
    if (b0 == 0xED)
      hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0)
      lo = 0x90;
    if (b0 == 0xF4)
      hi = 0x8F;
  } else {
    return {0, 1, false};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (k >= s.size())
      return {0, k, false};
    const unsigned char b = byte(k);
    const unsigned char min = k == 1 ? lo : 0x80;
    const unsigned char max = k == 1 ? hi : 0xBF;
    if (b < min || b > max)
      return {0, k, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need + 1, true};
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs (most prompts are mostly ASCII) need no decoding: 8 bytes at a time.
    uint64_t word = 0;
    if (i + sizeof(word) <= s.size()) {
      std::memcpy(&word, s.data() + i, sizeof(word));
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof(word);
        continue;
      }
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Decoded d = DecodeUtf8(s.substr(i));
    if (!d.valid)
      return false;
    i += d.length;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Decoded d = DecodeUtf8(s.substr(i));
    if (d.valid) {
      out.append(s.substr(i, d.length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += d.length;
  }
  return out;
}

}  // namespace switchyard::base
