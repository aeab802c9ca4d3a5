#include "compile/redis_entry.h"

#include <array>
#include <cstdint>
#include <string>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/byte_reader.h"
#include "base/byte_writer.h"
#include "base/status_macros.h"

namespace switchyard::compile {
namespace {

constexpr std::string_view kMagic = "SYCCENT1";
using Signature = std::array<unsigned char, kRedisEntrySignatureBytes>;

Signature Sign(std::string_view signed_bytes, std::string_view signing_key) {
  Signature mac{};
  unsigned int mac_bytes = 0;
  HMAC(EVP_sha256(), signing_key.data(), static_cast<int>(signing_key.size()),
       reinterpret_cast<const unsigned char*>(signed_bytes.data()), signed_bytes.size(), mac.data(),
       &mac_bytes);
  return mac;
}

}  // namespace

std::string EncodeRedisEntry(const EntryMetadata& metadata, std::string_view factors_json,
                             std::string_view artefact, std::string_view signing_key) {
  const std::string metadata_json = EncodeEntryMetadata(metadata);
  std::string out;
  out.reserve(kRedisEntryHeaderBytes + metadata_json.size() + factors_json.size() +
              artefact.size() + kRedisEntrySignatureBytes);
  out += kMagic;
  base::AppendLittleEndian(static_cast<uint32_t>(metadata_json.size()), &out);
  base::AppendLittleEndian(static_cast<uint32_t>(factors_json.size()), &out);
  base::AppendLittleEndian(static_cast<uint64_t>(artefact.size()), &out);
  out += metadata_json;
  out += factors_json;
  out += artefact;
  const Signature mac = Sign(out, signing_key);
  out.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return out;
}

absl::StatusOr<RedisEntry> DecodeRedisEntry(std::string_view value, std::string_view key,
                                            std::string_view signing_key,
                                            const EntryRequirements& requirements) {
  base::ByteReader reader({reinterpret_cast<const uint8_t*>(value.data()), value.size()});
  std::string_view magic;
  uint32_t metadata_bytes = 0;
  uint32_t factors_bytes = 0;
  uint64_t artefact_bytes = 0;
  if (!reader.ReadBytes(kMagic.size(), &magic) || magic != kMagic ||
      !reader.Read(&metadata_bytes) || !reader.Read(&factors_bytes) ||
      !reader.Read(&artefact_bytes)) {
    return absl::DataLossError("not a compile cache entry");
  }
  std::string_view metadata_json;
  std::string_view factors_json;
  std::string_view artefact;
  if (!reader.ReadBytes(metadata_bytes, &metadata_json) ||
      !reader.ReadBytes(factors_bytes, &factors_json) ||
      !reader.ReadBytes(artefact_bytes, &artefact)) {
    return absl::DataLossError("truncated entry");
  }
  if (reader.remaining() == 0)
    return absl::DataLossError("unsigned entry");
  if (reader.remaining() != kRedisEntrySignatureBytes)
    return absl::DataLossError("entry has a malformed signature");
  const Signature expected = Sign(value.substr(0, reader.position()), signing_key);
  if (CRYPTO_memcmp(expected.data(), reader.current(), expected.size()) != 0)
    return absl::DataLossError("entry signed with another key");

  RedisEntry entry;
  SY_ASSIGN_OR_RETURN(entry.metadata, ParseEntryMetadata(metadata_json));
  entry.factors_json = std::string(factors_json);
  SY_RETURN_IF_ERROR(CheckEntry(entry.metadata, key, artefact, requirements));
  entry.artefact = std::string(artefact);
  return entry;
}

}  // namespace switchyard::compile
