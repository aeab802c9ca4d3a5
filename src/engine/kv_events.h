// KV cache events as vLLM's KV event publisher reports them (vllm/distributed/kv_events.py,
// emitted from vllm/v1/core/block_pool.py): plain structs queued by the KV cache manager on
// the engine loop thread and drained once per step by whoever publishes them (ZeroMQ,
// tests). Hashes stay full digests here; the publisher picks the wire form (BlockHash::low64()
// by default, as VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, or the raw bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/block_hash.h"

namespace switchyard::engine {

// One per caching pass of one sequence: all blocks that became full in that pass.
struct BlockStored {
  std::vector<BlockHash> block_hashes;
  // Hash of the block before the first stored one; unset when the first is block 0.
  std::optional<BlockHash> parent_block_hash;
  // The tokens of all stored blocks, block_hashes.size() * block_size of them.
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> lora_name;
};

// A cached block was evicted (its id reused for new content).
struct BlockRemoved {
  std::vector<BlockHash> block_hashes;
};

// The prefix cache was reset.
struct AllBlocksCleared {};

using KvCacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

}  // namespace switchyard::engine
