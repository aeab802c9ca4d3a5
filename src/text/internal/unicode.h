// Unicode helpers for the tokenizer: character classes, NFC/NFKC normalization and
// lowercasing, backed by tables generated from Python's unicodedata (so that results match
// what HF `tokenizers` computes with Rust's Unicode crates for the same Unicode version).
// Pure functions; thread-safe. Inputs are valid UTF-8 (callers sanitize first).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace switchyard::text::internal {

// Category flags (kCat* in unicode_tables.h) of a code point; 0 for unassigned.
uint8_t CategoryFlags(uint32_t cp);

inline bool IsLetter(uint32_t cp) {
  return (CategoryFlags(cp) & 1) != 0;
}
inline bool IsNumber(uint32_t cp) {
  return (CategoryFlags(cp) & 2) != 0;
}
// The Unicode White_Space property (Rust's char::is_whitespace).
bool IsWhitespace(uint32_t cp);
// Rust's char::is_ascii_punctuation() || Unicode general category P*.
bool IsPunctuation(uint32_t cp);
// Approximates Rust's char::is_alphanumeric (Alphabetic || Numeric) by L*, M*, N*.
bool IsAlphanumeric(uint32_t cp);

std::string NormalizeNfc(std::string_view s);
std::string NormalizeNfkc(std::string_view s);
std::string NormalizeNfd(std::string_view s);
std::string NormalizeNfkd(std::string_view s);
std::string ToLower(std::string_view s);

// Decodes one code point of valid UTF-8 at s[*pos] and advances *pos.
uint32_t NextCodePoint(std::string_view s, size_t* pos);

}  // namespace switchyard::text::internal
