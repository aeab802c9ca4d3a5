#include "router/prefix/kv_event_indexer.h"

#include <span>
#include <variant>
#include <vector>

#include "router/prefix/block_keys.h"

namespace switchyard::router {

void KvEventIndexer::Apply(const std::string& endpoint, const kvx::KvEventBatch& batch) {
  base::MutexLock lock(&mu_);
  for (const kvx::KvCacheEvent& event : batch.events) {
    if (const auto* stored = std::get_if<kvx::BlockStored>(&event)) {
      Stored(endpoint, *stored);
    } else if (const auto* removed = std::get_if<kvx::BlockRemoved>(&event)) {
      Removed(endpoint, *removed);
    } else {
      keys_.erase(endpoint);
      index_->RemoveEndpoint(endpoint);
    }
  }
}

void KvEventIndexer::Stored(const std::string& endpoint, const kvx::BlockStored& e) {
  // CPU-offload copies carry no tokens; other media are the same prefix in another tier.
  if (e.token_ids.empty())
    return;
  const size_t n = e.block_hashes.size();
  if (e.block_size <= 0 || e.token_ids.size() != n * static_cast<size_t>(e.block_size)) {
    ++skipped_;
    return;
  }
  auto& map = keys_[endpoint];
  uint64_t parent = seed_;
  if (e.parent_block_hash.has_value()) {
    auto it = map.find(*e.parent_block_hash);
    if (it == map.end()) {
      ++skipped_;
      return;
    }
    parent = it->second;
  }
  std::vector<uint64_t> keys;
  keys.reserve(n);
  const std::span<const int32_t> tokens(e.token_ids);
  const auto bs = static_cast<size_t>(e.block_size);
  for (size_t i = 0; i < n; ++i) {
    parent = NextBlockKey(parent, tokens.subspan(i * bs, bs));
    keys.push_back(parent);
    map[e.block_hashes[i]] = parent;
  }
  index_->Add(endpoint, keys);
}

void KvEventIndexer::Removed(const std::string& endpoint, const kvx::BlockRemoved& e) {
  // Only the pool's blocks are indexed: a tier dropping its copy leaves the pool's as it is.
  if (e.medium.has_value() && *e.medium != kvx::kMediumGpu)
    return;
  auto found = keys_.find(endpoint);
  if (found == keys_.end())
    return;
  std::vector<uint64_t> keys;
  for (const kvx::EventHash& h : e.block_hashes) {
    auto it = found->second.find(h);
    if (it == found->second.end())
      continue;
    keys.push_back(it->second);
    found->second.erase(it);
  }
  index_->Remove(endpoint, keys);
}

void KvEventIndexer::RemoveEndpoint(const std::string& endpoint) {
  base::MutexLock lock(&mu_);
  keys_.erase(endpoint);
  index_->RemoveEndpoint(endpoint);
}

int64_t KvEventIndexer::num_skipped() const {
  base::MutexLock lock(&mu_);
  return skipped_;
}

}  // namespace switchyard::router
