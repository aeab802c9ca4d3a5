#include "engine/block_hash.h"

#include <cstdlib>
#include <random>

#include <openssl/rand.h>
#include <openssl/sha.h>

namespace switchyard::engine {

uint64_t BlockHash::low64() const {
  uint64_t value = 0;
  for (size_t i = bytes.size() - 8; i < bytes.size(); ++i)
    value = (value << 8) | bytes[i];
  return value;
}

std::string BlockHash::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

BlockHash Sha256(std::span<const uint8_t> data) {
  BlockHash digest;
  SHA256(data.data(), data.size(), digest.bytes.data());
  return digest;
}

BlockHasher::BlockHasher(std::optional<std::string_view> python_hash_seed) {
  if (python_hash_seed.has_value()) {
    encoder_.AddText(*python_hash_seed);
    none_hash_ = Sha256(encoder_.bytes());
    encoder_.Clear();
    return;
  }
  if (RAND_bytes(none_hash_.bytes.data(), static_cast<int>(none_hash_.bytes.size())) != 1) {
    // OpenSSL's CSPRNG failing is exotic; any unpredictable value serves here because the
    // random NONE_HASH only has to differ between processes.
    std::random_device device;
    for (uint8_t& b : none_hash_.bytes)
      b = static_cast<uint8_t>(device());
  }
}

BlockHasher BlockHasher::WithNoneHash(const BlockHash& none_hash) {
  BlockHasher hasher;
  hasher.none_hash_ = none_hash;
  return hasher;
}

std::optional<std::string> BlockHasher::SeedFromEnvironment() {
  const char* seed = std::getenv("PYTHONHASHSEED");
  if (seed == nullptr)
    return std::nullopt;
  return std::string(seed);
}

void BlockHasher::BeginBlock(const BlockHash* parent, size_t num_tokens) {
  encoder_.Clear();
  encoder_.BeginArray(3);
  encoder_.AddBytes(parent != nullptr ? parent->bytes : none_hash_.bytes);
  encoder_.BeginArray(num_tokens);
}

BlockHash BlockHasher::FinishBlock(const BlockHashExtras& extras, int64_t block_index) {
  const bool has_salt = block_index == 0 && !extras.cache_salt.empty();
  const int num_keys = (extras.lora_name.has_value() ? 1 : 0) + (has_salt ? 1 : 0);
  if (num_keys == 0) {
    encoder_.AddNull();
  } else {
    encoder_.BeginArray(num_keys);
    if (extras.lora_name.has_value())
      encoder_.AddText(*extras.lora_name);
    if (has_salt)
      encoder_.AddText(extras.cache_salt);
  }
  return Sha256(encoder_.bytes());
}

BlockHash BlockHasher::Hash(const BlockHash* parent, std::span<const int32_t> tokens,
                            const BlockHashExtras& extras, int64_t block_index) {
  BeginBlock(parent, tokens.size());
  for (int32_t token : tokens)
    encoder_.AddInt(token);
  return FinishBlock(extras, block_index);
}

BlockHash BlockHasher::Hash(const BlockHash* parent, std::span<const int64_t> tokens,
                            const BlockHashExtras& extras, int64_t block_index) {
  BeginBlock(parent, tokens.size());
  for (int64_t token : tokens)
    encoder_.AddInt(token);
  return FinishBlock(extras, block_index);
}

}  // namespace switchyard::engine
