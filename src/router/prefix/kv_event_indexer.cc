#include "router/prefix/kv_event_indexer.h"

#include <optional>
#include <span>
#include <string>
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

namespace {

// The index's tier of a KV event's medium (absent: the pool, as vLLM omits it); nullopt for
// media the index does not keep.
std::optional<KvTier> TierOf(const std::optional<std::string>& medium) {
  return medium.has_value() ? KvTierOfMedium(*medium) : KvTier::kPool;
}

}  // namespace

void KvEventIndexer::Stored(const std::string& endpoint, const kvx::BlockStored& e) {
  const std::optional<KvTier> tier = TierOf(e.medium);
  if (!tier.has_value())
    return;
  const size_t n = e.block_hashes.size();
  if (e.token_ids.empty() && *tier != KvTier::kPool) {
    StoredInTier(endpoint, e, *tier);
    return;
  }
  if (e.block_size <= 0 || e.token_ids.size() != n * static_cast<size_t>(e.block_size)) {
    ++skipped_;
    return;
  }
  HashMap& map = keys_[endpoint];
  uint64_t parent = seed_;
  if (e.parent_block_hash.has_value()) {
    auto it = map.find(*e.parent_block_hash);
    if (it == map.end()) {
      ++skipped_;
      return;
    }
    parent = it->second.key;
  }
  std::vector<uint64_t> keys;
  keys.reserve(n);
  const std::span<const int32_t> tokens(e.token_ids);
  const auto bs = static_cast<size_t>(e.block_size);
  for (size_t i = 0; i < n; ++i) {
    parent = NextBlockKey(parent, tokens.subspan(i * bs, bs));
    keys.push_back(parent);
    Known& known = map[e.block_hashes[i]];
    known.key = parent;
    known.tiers = static_cast<uint8_t>(known.tiers | KvTierBit(*tier));
  }
  index_->Add(endpoint, keys, *tier);
}

void KvEventIndexer::StoredInTier(const std::string& endpoint, const kvx::BlockStored& e,
                                  KvTier tier) {
  HashMap& map = keys_[endpoint];
  std::vector<uint64_t> keys;
  for (const kvx::EventHash& h : e.block_hashes) {
    auto it = map.find(h);
    if (it == map.end()) {
      ++skipped_;  // never in the pool while the router listened: no tokens to key it by
      continue;
    }
    it->second.tiers = static_cast<uint8_t>(it->second.tiers | KvTierBit(tier));
    keys.push_back(it->second.key);
  }
  index_->Add(endpoint, keys, tier);
}

void KvEventIndexer::Removed(const std::string& endpoint, const kvx::BlockRemoved& e) {
  const std::optional<KvTier> tier = TierOf(e.medium);
  if (!tier.has_value())
    return;
  auto found = keys_.find(endpoint);
  if (found == keys_.end())
    return;
  std::vector<uint64_t> keys;
  for (const kvx::EventHash& h : e.block_hashes) {
    auto it = found->second.find(h);
    if (it == found->second.end() || (it->second.tiers & KvTierBit(*tier)) == 0)
      continue;
    keys.push_back(it->second.key);
    it->second.tiers = static_cast<uint8_t>(it->second.tiers & ~KvTierBit(*tier));
    if (it->second.tiers == 0)
      found->second.erase(it);
  }
  index_->Remove(endpoint, keys, *tier);
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
