// GPT-2's byte-level alphabet: every byte maps to a printable code point so that BPE
// vocabularies can store arbitrary bytes as text. Constant tables; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace switchyard::text::internal {

// The UTF-8 text of the code point that stands for `byte`.
std::string_view ByteToChars(uint8_t byte);
// The byte that code point `cp` stands for, or -1 when `cp` is not in the alphabet.
int CharToByte(uint32_t cp);
// Appends the byte-level form of `s` to `out`.
void AppendByteLevel(std::string_view s, std::string* out);

// Split patterns of the byte-level families (as written in their tokenizer.json files).
inline constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
inline constexpr std::string_view kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline constexpr std::string_view kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace switchyard::text::internal
