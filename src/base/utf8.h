// UTF-8 decoding and encoding, strict as Python's codec: overlong forms, surrogates and
// code points above U+10FFFF are invalid. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace switchyard::base {

struct Utf8Decoded {
  uint32_t code_point = 0;
  // Bytes consumed: the sequence length when valid; when invalid, the length of the
  // maximal invalid prefix (at least 1), as the Unicode "substitution of maximal subparts"
  // practice and Python's decoder with errors="replace" both use.
  size_t length = 1;
  bool valid = false;
};

// Decodes the first code point of `s`. REQUIRES: !s.empty().
Utf8Decoded DecodeUtf8(std::string_view s);

// Appends the UTF-8 encoding of `code_point` (REQUIRES: <= 0x10FFFF).
void AppendUtf8(uint32_t code_point, std::string* out);

// True when all of `s` is valid UTF-8.
bool IsValidUtf8(std::string_view s);

// Replaces each maximal invalid subsequence with U+FFFD.
std::string SanitizeUtf8(std::string_view s);

}  // namespace switchyard::base
