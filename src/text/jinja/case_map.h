// Python's str case methods over UTF-8 with full Unicode case mapping (multi-character
// mappings such as "ß".upper() == "SS" and the final-sigma rule of lower()). Invalid UTF-8
// bytes pass through unchanged. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace switchyard::text::jinja {

// str.upper(), str.lower(), str.capitalize() and str.title().
std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
std::string Capitalize(std::string_view s);
std::string Title(std::string_view s);

// Unicode properties as CPython reads them: Cased, Lowercase, Uppercase, Titlecase (Lt).
bool IsCased(uint32_t cp);
bool IsLowercase(uint32_t cp);
bool IsUppercase(uint32_t cp);
bool IsTitlecase(uint32_t cp);

}  // namespace switchyard::text::jinja
