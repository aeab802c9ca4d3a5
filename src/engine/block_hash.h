// Prefix-caching block hashes, bit-compatible with vLLM's `sha256_cbor` mode
// (vllm/v1/core/kv_cache_utils.py hash_block_tokens, vllm/utils/hashing.py sha256_cbor):
//
//   hash(block) = SHA-256(canonical_cbor((parent or NONE_HASH, tuple(tokens), extra_keys)))
//
// where extra_keys is null or an array of, in order, the LoRA name (every block) and the
// cache_salt (block 0 only, when non-empty). NONE_HASH = SHA-256(cbor(text PYTHONHASHSEED))
// when a seed is given, else 32 random bytes, so hashes only agree across processes (and
// with vLLM) when both sides use the same seed. Multimodal and prompt-embeds keys are not
// produced: the engine serves text-only models.
//
// A BlockHasher is immutable apart from its scratch encoder: one per thread (the engine
// loop owns one through the KV cache manager).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/cbor.h"
#include "kvx/kv_events.h"

namespace switchyard::engine {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  // The integer vLLM publishes in KV events by default (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1):
  // int.from_bytes(digest, "big") & (2**64 - 1), i.e. the last 8 bytes, big-endian.
  uint64_t low64() const;
  std::string ToHex() const;
  // The full digest as KV events carry it; the publisher picks the wire form.
  kvx::EventHash event_hash() const { return kvx::EventHash::FromBytes(bytes); }

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& hash) {
    // The digest is already uniformly distributed; 8 bytes are plenty for a hash table.
    return H::combine(std::move(h), hash.low64());
  }
};

// Per-sequence inputs to extra_keys. Both are part of the request, not of the block.
struct BlockHashExtras {
  // Set when the request runs under a LoRA adapter (vLLM's lora_request.lora_name).
  std::optional<std::string> lora_name;
  // Tenant isolation salt mixed into block 0 only; empty means none.
  std::string cache_salt;
};

class BlockHasher {
 public:
  // `python_hash_seed` plays the role of PYTHONHASHSEED in vLLM: set, NONE_HASH is the hash
  // of that string; unset, NONE_HASH is random (hashes are then private to this process).
  explicit BlockHasher(std::optional<std::string_view> python_hash_seed);
  // For tests and for adopting a peer's NONE_HASH verbatim.
  static BlockHasher WithNoneHash(const BlockHash& none_hash);

  // The PYTHONHASHSEED environment variable, as vLLM reads it.
  static std::optional<std::string> SeedFromEnvironment();

  const BlockHash& none_hash() const { return none_hash_; }

  // Hash of block `block_index` of a sequence, chained to `parent` (nullptr for block 0).
  // REQUIRES: tokens is the block's full token list.
  BlockHash Hash(const BlockHash* parent, std::span<const int32_t> tokens,
                 const BlockHashExtras& extras, int64_t block_index);
  // Same, for token ids outside int32 (vLLM hashes Python ints of any size up to 64 bits
  // here).
  BlockHash Hash(const BlockHash* parent, std::span<const int64_t> tokens,
                 const BlockHashExtras& extras, int64_t block_index);

 private:
  BlockHasher() = default;

  void BeginBlock(const BlockHash* parent, size_t num_tokens);
  BlockHash FinishBlock(const BlockHashExtras& extras, int64_t block_index);

  BlockHash none_hash_;
  CborEncoder encoder_;
};

// SHA-256 of `data`.
BlockHash Sha256(std::span<const uint8_t> data);

}  // namespace switchyard::engine
