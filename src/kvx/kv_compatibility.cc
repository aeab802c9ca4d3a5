#include "kvx/kv_compatibility.h"

#include <array>

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

std::string KvCompatibility::Hash() const {
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

  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(encoded.data()), encoded.size(), digest.data());
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(digest.size() * 2);
  for (unsigned char b : digest) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

}  // namespace switchyard::kvx
