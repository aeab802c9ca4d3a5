#include "kvx/kv_compatibility.h"

#include <array>

#include "absl/strings/escaping.h"
#include <openssl/sha.h>

#include "base/byte_writer.h"

namespace switchyard::kvx {
namespace {

// Fixed-width little-endian integers and length-prefixed strings: the encoding is the
// same on every machine and no field can run into the next.
void AppendInt(int64_t value, std::string* out) {
  base::AppendLittleEndian(value, out);
}

void AppendString(std::string_view value, std::string* out) {
  AppendInt(static_cast<int64_t>(value.size()), out);
  out->append(value);
}

}  // namespace

std::array<uint8_t, 32> KvCompatibility::Digest() const {
  std::string encoded;
  AppendString("switchyard.kvx.compatibility", &encoded);
  AppendString(model_fingerprint, &encoded);
  AppendString(dtype, &encoded);
  AppendInt(num_layers, &encoded);
  AppendInt(kv_heads, &encoded);
  AppendInt(head_dim, &encoded);
  AppendInt(block_size, &encoded);
  AppendString(layout, &encoded);
  AppendInt(protocol_version, &encoded);

  static_assert(SHA256_DIGEST_LENGTH == 32);
  std::array<uint8_t, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(encoded.data()), encoded.size(), digest.data());
  return digest;
}

std::string KvCompatibility::Hash() const {
  const std::array<uint8_t, 32> digest = Digest();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace switchyard::kvx
