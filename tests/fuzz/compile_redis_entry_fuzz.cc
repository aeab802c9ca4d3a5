// Arbitrary bytes as a compile cache entry read from Redis, which other hosts write. Nothing
// may crash; decoding may only succeed or say DataLoss; an entry that decodes must be byte for
// byte what EncodeRedisEntry writes for it, and must fail under another signing key.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "compile/redis_entry.h"

namespace switchyard::compile {
namespace {

// The corpus's valid entries are signed with this key, for this key and version.
constexpr std::string_view kSigningKey = "fuzz-signing-key-0123456789";
constexpr std::string_view kKey =
    "b063c41d29261952f5d94fa0ec1652e54a709097f3d093ebb936596e1238fff2";

void Check(std::string_view input) {
  EntryRequirements requirements;
  requirements.project_version = "fuzz";
  requirements.has_isa_feature = [](std::string_view feature) { return feature != "lacking"; };
  const absl::StatusOr<RedisEntry> entry = DecodeRedisEntry(input, kKey, kSigningKey, requirements);
  if (entry.ok()) {
    if (EncodeRedisEntry(entry->metadata, entry->factors_json, entry->artefact, kSigningKey) !=
            input ||
        DecodeRedisEntry(input, kKey, "another-signing-key-012345", requirements).ok()) {
      std::abort();
    }
  } else if (!absl::IsDataLoss(entry.status())) {
    std::abort();
  }
}

}  // namespace
}  // namespace switchyard::compile

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  switchyard::compile::Check({reinterpret_cast<const char*>(data), size});
  return 0;
}
