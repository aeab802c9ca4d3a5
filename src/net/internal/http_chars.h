// RFC 9110's character classes, as 256-entry tables for the HTTP parser and the head writers:
// token characters (methods, field names, transfer codings) with their lower-case form, and
// the bytes a field value or reason phrase may hold; and the case-insensitive comparison of
// names and tokens. ASCII only, whatever the locale (std::tolower consults it per character).
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace switchyard::net::internal {

// Each token character mapped to its lower-case form; 0 for every other byte.
inline constexpr std::array<char, 256> kLowerTokenChars = [] {
  std::array<char, 256> table{};
  for (int c = '0'; c <= '9'; ++c)
    table[c] = static_cast<char>(c);
  for (int c = 'a'; c <= 'z'; ++c) {
    table[c] = static_cast<char>(c);
    table[c - 'a' + 'A'] = static_cast<char>(c);
  }
  for (const char c : std::string_view("!#$%&'*+-.^_`|~"))
    table[static_cast<unsigned char>(c)] = c;
  return table;
}();

// HTAB, SP, visible ASCII and obs-text: not a control byte and not DEL.
inline constexpr std::array<bool, 256> kFieldValueChars = [] {
  std::array<bool, 256> table{};
  table['\t'] = true;
  for (int c = ' '; c < 0x7f; ++c)
    table[c] = true;
  for (int c = 0x80; c < 0x100; ++c)
    table[c] = true;
  return table;
}();

inline bool IsTokenChar(char c) {
  return kLowerTokenChars[static_cast<unsigned char>(c)] != 0;
}

inline bool IsFieldValueChar(char c) {
  return kFieldValueChars[static_cast<unsigned char>(c)];
}

// Every byte of `s` is a token character (true for an empty `s`).
inline bool AllTokenChars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(c); });
}

inline bool AllFieldValueChars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return IsFieldValueChar(c); });
}

constexpr char AsciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Equal but for the case of ASCII letters (header names, Connection and Transfer-Encoding
// tokens).
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

}  // namespace switchyard::net::internal
