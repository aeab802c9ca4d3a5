// The files of one compile cache entry besides the artefact itself, shared by the host
// directory and the Redis level:
//
//   metadata.json            {"format_version":1,"key":"<hex>","project_version":"0.1.0",
//                             "artefact_sha256":"<hex>","artefact_bytes":N,
//                             "isa_features":["avx512"],"created_unix_s":T}
//   cache_key_factors.json   CacheKey::FactorsJson(), for diagnosis only (never trusted)
//
// and the check that decides whether an entry may be loaded: an entry that fails it is a
// miss, whatever the reason (corrupt, truncated, foreign, stale, built for another CPU).
// Functions only; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "compile/isa_features.h"

namespace switchyard::compile {

inline constexpr int64_t kEntryFormatVersion = 1;
inline constexpr char kMetadataFileName[] = "metadata.json";
inline constexpr char kFactorsFileName[] = "cache_key_factors.json";
inline constexpr char kArtefactFileName[] = "artefact.so";

// This build's version (the project's CMake version).
std::string_view ProjectVersion();

struct EntryMetadata {
  int64_t format_version = kEntryFormatVersion;
  std::string key;
  std::string project_version;
  std::string artefact_sha256;
  int64_t artefact_bytes = 0;
  std::vector<std::string> isa_features;
  int64_t created_unix_s = 0;
};

// Metadata for `artefact` stored under `key` by `project_version`, created now.
EntryMetadata MakeEntryMetadata(std::string_view key, std::string_view artefact,
                                std::vector<std::string> isa_features,
                                std::string_view project_version);

std::string EncodeEntryMetadata(const EntryMetadata& metadata);
// DataLoss naming what is wrong when `text` is not such an object.
absl::StatusOr<EntryMetadata> ParseEntryMetadata(std::string_view text);

// What a process can load.
struct EntryRequirements {
  std::string project_version{ProjectVersion()};
  IsaFeaturePredicate has_isa_feature = CpuHasIsaFeature;
};

// OK when `metadata` names `key`, this format and project version, ISA features that are all
// present, and `artefact`'s exact size and SHA-256; DataLoss saying what is wrong otherwise.
absl::Status CheckEntry(const EntryMetadata& metadata, std::string_view key,
                        std::string_view artefact, const EntryRequirements& requirements);

// A one-line summary of a factors file's semantic factors for listings:
// `name=value name=value ...` with nested objects as `{n}` (n fields) and lists as `[n]`,
// cut to `max_chars`. DataLoss when the text is not a factors file.
absl::StatusOr<std::string> SummarizeFactorsFile(std::string_view text, size_t max_chars);

}  // namespace switchyard::compile
