// KV cache events as vLLM's KV event publisher reports them (vllm/distributed/kv_events.py,
// emitted from vllm/v1/core/block_pool.py): plain value structs shared by the engine, which
// queues them on its loop thread, the publisher that puts them on the wire
// (kv_event_codec.h, kv_event_publisher.h) and the router that decodes them. No locking:
// whoever holds a value owns it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace switchyard::kvx {

// A block hash as KV events carry it: digest bytes (vLLM's 32-byte SHA-256, 16 for xxhash),
// or an integer (vLLM's default VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 form; SGLang's signed
// int64, kept here as its two's-complement bit pattern).
class EventHash {
 public:
  static constexpr size_t kMaxBytes = 32;

  EventHash() = default;
  static EventHash FromInt(uint64_t value);
  // REQUIRES: bytes.size() <= kMaxBytes.
  static EventHash FromBytes(std::span<const uint8_t> bytes);

  bool is_int() const { return is_int_; }
  // The integer form: the value itself, or the last 8 digest bytes big-endian (shorter
  // digests left-padded with zeros), which is what vLLM publishes by default
  // (int.from_bytes(digest, "big") & (2**64 - 1)) and how llm-d folds byte hashes.
  uint64_t AsUint64() const;
  // Digest bytes; for an integer hash, its 8 big-endian bytes.
  std::span<const uint8_t> bytes() const { return {bytes_.data(), size_}; }

  friend bool operator==(const EventHash&, const EventHash&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const EventHash& hash) {
    return H::combine(std::move(h), hash.AsUint64(), hash.is_int_, hash.size_);
  }

 private:
  std::array<uint8_t, kMaxBytes> bytes_{};
  uint8_t size_ = 0;
  bool is_int_ = false;
};

inline constexpr char kMediumGpu[] = "GPU";
inline constexpr char kMediumCpu[] = "CPU";
// Switchyard's disk tier (vLLM names no medium for it).
inline constexpr char kMediumDisk[] = "DISK";
// Switchyard's remote tier on Redis.
inline constexpr char kMediumRedis[] = "REDIS";

// One per caching pass of one sequence: all blocks that became full in that pass. Field
// order and optionality follow vLLM's BlockStored.
struct BlockStored {
  std::vector<EventHash> block_hashes;
  // Hash of the block before the first stored one; unset when the first is block 0.
  std::optional<EventHash> parent_block_hash;
  // The tokens of all stored blocks, block_hashes.size() * block_size of them (none for a
  // CPU-offload event).
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;
  std::optional<std::string> lora_name;
  // vLLM's list[tuple | None] of per-block extra hash keys, kept as its raw msgpack bytes:
  // the items may be any Python value (multimodal keys are nested tuples).
  std::optional<std::string> extra_keys_msgpack;
  std::optional<int64_t> group_idx;
  std::optional<std::string> kv_cache_spec_kind;
  std::optional<int64_t> kv_cache_spec_sliding_window;

  friend bool operator==(const BlockStored&, const BlockStored&) = default;
};

// Cached blocks were evicted (their ids reused for new content).
struct BlockRemoved {
  std::vector<EventHash> block_hashes;
  std::optional<std::string> medium;
  std::optional<int64_t> group_idx;

  friend bool operator==(const BlockRemoved&, const BlockRemoved&) = default;
};

// The prefix cache was reset.
struct AllBlocksCleared {
  friend bool operator==(const AllBlocksCleared&, const AllBlocksCleared&) = default;
};

using KvCacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

// vLLM's EventBatch (KVEventBatch): what one engine step published.
struct KvEventBatch {
  double ts = 0;  // seconds since the Unix epoch (time.time())
  std::vector<KvCacheEvent> events;
  std::optional<int32_t> data_parallel_rank;

  friend bool operator==(const KvEventBatch&, const KvEventBatch&) = default;
};

}  // namespace switchyard::kvx
