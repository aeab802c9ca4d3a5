// Arbitrary bytes as a compile cache entry's metadata.json and cache_key_factors.json, read
// back from a host directory anyone on the host may write. Nothing may crash; a parse may
// only succeed or say DataLoss; metadata that parses must survive an encode/parse round trip
// unchanged, and a factors summary must respect its length limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/status/statusor.h"

#include "compile/entry_files.h"

namespace switchyard::compile {
namespace {

constexpr size_t kSummaryChars = 60;

bool SameMetadata(const EntryMetadata& a, const EntryMetadata& b) {
  return a.format_version == b.format_version && a.key == b.key &&
         a.project_version == b.project_version && a.artefact_sha256 == b.artefact_sha256 &&
         a.artefact_bytes == b.artefact_bytes && a.isa_features == b.isa_features &&
         a.created_unix_s == b.created_unix_s;
}

void Check(std::string_view input) {
  const absl::StatusOr<EntryMetadata> metadata = ParseEntryMetadata(input);
  if (metadata.ok()) {
    const absl::StatusOr<EntryMetadata> again = ParseEntryMetadata(EncodeEntryMetadata(*metadata));
    if (!again.ok() || !SameMetadata(*metadata, *again))
      std::abort();
  } else if (!absl::IsDataLoss(metadata.status())) {
    std::abort();
  }
  const absl::StatusOr<std::string> summary = SummarizeFactorsFile(input, kSummaryChars);
  if (summary.ok() ? summary->size() > kSummaryChars : !absl::IsDataLoss(summary.status()))
    std::abort();
}

}  // namespace
}  // namespace switchyard::compile

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  switchyard::compile::Check({reinterpret_cast<const char*>(data), size});
  return 0;
}
