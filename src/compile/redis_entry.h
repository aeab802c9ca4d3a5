// A compile cache entry as one Redis value, signed, since a writable shared cache is code
// execution for whoever can write to it:
//
//   magic "SYCCENT1" | metadata bytes (u32 LE) | factors bytes (u32 LE) |
//   artefact bytes (u64 LE) | metadata.json | cache_key_factors.json | artefact |
//   HMAC-SHA256 under the operator's signing key of everything before (32)
//
// Decoding checks the signature before anything it signs is parsed, then the entry itself
// (CheckEntry): a truncated, unsigned, wrongly signed, foreign, stale or wrong-ISA value is a
// DataLoss saying which, never an entry. Functions only; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "compile/entry_files.h"

namespace switchyard::compile {

inline constexpr size_t kRedisEntryHeaderBytes = 24;
inline constexpr size_t kRedisEntrySignatureBytes = 32;

struct RedisEntry {
  EntryMetadata metadata;
  std::string factors_json;
  std::string artefact;
};

std::string EncodeRedisEntry(const EntryMetadata& metadata, std::string_view factors_json,
                             std::string_view artefact, std::string_view signing_key);

// The entry of `key` in `value`, checked against `requirements`; DataLoss otherwise.
absl::StatusOr<RedisEntry> DecodeRedisEntry(std::string_view value, std::string_view key,
                                            std::string_view signing_key,
                                            const EntryRequirements& requirements);

}  // namespace switchyard::compile
