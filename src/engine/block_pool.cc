#include "engine/block_pool.h"

#include <algorithm>

#include "base/logging.h"

namespace switchyard::engine {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching,
                     std::vector<kvx::KvCacheEvent>* events)
    : enable_caching_(enable_caching), events_(events), blocks_(num_blocks) {
  SY_CHECK(num_blocks > 0);
  head_next_ = head_prev_ = sentinel();
  for (BlockId id = 0; id < num_blocks; ++id)
    PushBack(id);
}

void BlockPool::Unlink(BlockId block) {
  Block& b = blocks_[block];
  next_of(b.prev) = b.next;
  prev_of(b.next) = b.prev;
  b.prev = b.next = kNotQueued;
  --num_free_;
}

void BlockPool::PushBack(BlockId block) {
  Block& b = blocks_[block];
  b.prev = head_prev_;
  b.next = sentinel();
  next_of(head_prev_) = block;
  head_prev_ = block;
  ++num_free_;
}

void BlockPool::Evict(BlockId block) {
  Block& b = blocks_[block];
  auto it = cache_map_.find(b.hash);
  SY_CHECK(it != cache_map_.end());
  auto& ids = it->second;
  ids.erase(std::find(ids.begin(), ids.end(), block));
  if (ids.empty())
    cache_map_.erase(it);
  if (events_ != nullptr)
    events_->push_back(kvx::BlockRemoved{{b.hash.event_hash()}, kvx::kMediumGpu, {}});
  b.cached = false;
}

void BlockPool::Allocate(int32_t n, std::vector<BlockId>* out) {
  SY_CHECK(n <= num_free_);
  for (int32_t i = 0; i < n; ++i) {
    const BlockId block = head_next_;
    Unlink(block);
    if (blocks_[block].cached)
      Evict(block);
    blocks_[block].ref_count = 1;
    out->push_back(block);
  }
}

void BlockPool::Touch(std::span<const BlockId> blocks) {
  for (BlockId block : blocks) {
    if (blocks_[block].ref_count == 0)
      Unlink(block);
    ++blocks_[block].ref_count;
  }
}

void BlockPool::Release(BlockId block) {
  Block& b = blocks_[block];
  SY_CHECK(b.ref_count > 0);
  if (--b.ref_count == 0)
    PushBack(block);
}

std::optional<BlockId> BlockPool::Lookup(const BlockHash& hash) const {
  auto it = cache_map_.find(hash);
  if (it == cache_map_.end())
    return std::nullopt;
  return it->second.front();
}

void BlockPool::Cache(BlockId block, const BlockHash& hash) {
  Block& b = blocks_[block];
  SY_CHECK(enable_caching_ && b.ref_count > 0 && !b.cached);
  b.cached = true;
  b.hash = hash;
  cache_map_[hash].push_back(block);
}

bool BlockPool::ResetPrefixCache() {
  if (num_free_ != num_blocks())
    return false;
  cache_map_.clear();
  for (Block& b : blocks_)
    b.cached = false;
  if (events_ != nullptr)
    events_->push_back(kvx::AllBlocksCleared{});
  return true;
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> order;
  order.reserve(num_free_);
  for (BlockId id = head_next_; id != sentinel(); id = blocks_[id].next)
    order.push_back(id);
  return order;
}

}  // namespace switchyard::engine
