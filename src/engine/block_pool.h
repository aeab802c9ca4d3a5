// BlockPool: the KV cache's physical blocks as integer ids with reference counts, the free
// queue that doubles as the prefix cache's LRU, and the hash -> block map of cached full
// blocks. Semantics follow vLLM's BlockPool and FreeKVCacheBlockQueue
// (vllm/v1/core/block_pool.py, kv_cache_utils.py):
//  - all blocks exist from construction; the free queue starts in id order;
//  - a block with no references sits in the free queue but keeps its hash, so it can still
//    be hit until it is handed out again (then it is evicted: hash dropped, BlockRemoved);
//  - freed blocks join the back of the queue, allocation pops from the front (LRU first);
//  - identical full blocks are not deduplicated: one hash may map to several blocks, and a
//    lookup returns the one cached first.
//
// Owned by the KV cache manager and used only on the engine loop thread; no locks. The
// free queue is intrusive (prev/next ids per block), so nothing here allocates per token.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"

#include "engine/block_hash.h"
#include "kvx/kv_events.h"

namespace switchyard::engine {

using BlockId = int32_t;
// A block-table entry for a block the sequence no longer holds because attention never
// reads it again (sliding window); runners skip such entries.
inline constexpr BlockId kNullBlock = -1;

class BlockPool {
 public:
  using CacheMap = absl::flat_hash_map<BlockHash, absl::InlinedVector<BlockId, 1>>;

  // `events` receives BlockRemoved and AllBlocksCleared; null disables them. Not owned.
  // REQUIRES: num_blocks > 0.
  BlockPool(int32_t num_blocks, bool enable_caching, std::vector<kvx::KvCacheEvent>* events);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free_blocks() const { return num_free_; }
  // vLLM's kv_cache_usage_perc: the fraction of blocks referenced by some sequence.
  double Usage() const { return 1.0 - static_cast<double>(num_free_) / num_blocks(); }

  // Pops `n` blocks from the front of the free queue, evicting cached ones, and appends
  // them to `out` with one reference each.
  // REQUIRES: n <= num_free_blocks().
  void Allocate(int32_t n, std::vector<BlockId>* out);
  // Takes one more reference on each block (a prefix hit or a fork); a block that had none
  // leaves the free queue.
  void Touch(std::span<const BlockId> blocks);
  // Drops one reference; at zero the block joins the back of the free queue, keeping its
  // hash. REQUIRES: ref_count(block) > 0.
  void Release(BlockId block);

  // The first-cached block holding `hash`, if any.
  std::optional<BlockId> Lookup(const BlockHash& hash) const;
  // Publishes a full, referenced block under `hash`.
  // REQUIRES: caching enabled, ref_count(block) > 0, hash(block) == nullptr.
  void Cache(BlockId block, const BlockHash& hash);
  // Drops every hash (vLLM's reset_prefix_cache). Returns false, changing nothing, when
  // some block is still referenced.
  bool ResetPrefixCache();

  int32_t ref_count(BlockId block) const { return blocks_[block].ref_count; }
  // The block's hash while it is cached, else nullptr.
  const BlockHash* hash(BlockId block) const {
    return blocks_[block].cached ? &blocks_[block].hash : nullptr;
  }
  bool in_free_queue(BlockId block) const { return blocks_[block].next != kNotQueued; }
  // The free queue from front (evicted first) to back. For tests and debugging.
  std::vector<BlockId> FreeQueue() const;
  const CacheMap& cache_map() const { return cache_map_; }

 private:
  static constexpr BlockId kNotQueued = -1;

  struct Block {
    int32_t ref_count = 0;
    // Free-queue links; the sentinel is index num_blocks(). kNotQueued when not queued.
    BlockId prev = kNotQueued;
    BlockId next = kNotQueued;
    bool cached = false;
    BlockHash hash;
  };

  BlockId sentinel() const { return num_blocks(); }
  BlockId& prev_of(BlockId id) { return id == sentinel() ? head_prev_ : blocks_[id].prev; }
  BlockId& next_of(BlockId id) { return id == sentinel() ? head_next_ : blocks_[id].next; }
  void Unlink(BlockId block);
  void PushBack(BlockId block);
  void Evict(BlockId block);

  bool enable_caching_;
  std::vector<kvx::KvCacheEvent>* events_;
  std::vector<Block> blocks_;
  // Links of the sentinel: head_next_ is the front of the queue, head_prev_ the back.
  BlockId head_next_;
  BlockId head_prev_;
  int32_t num_free_ = 0;
  CacheMap cache_map_;
};

}  // namespace switchyard::engine
