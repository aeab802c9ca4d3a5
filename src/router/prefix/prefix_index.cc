#include "router/prefix/prefix_index.h"

#include <algorithm>

#include "kvx/kv_events.h"

namespace switchyard::router {
namespace {

size_t Index(KvTier tier) {
  return static_cast<size_t>(tier);
}

}  // namespace

std::optional<KvTier> KvTierOfMedium(std::string_view medium) {
  if (medium == kvx::kMediumGpu)
    return KvTier::kPool;
  if (medium == kvx::kMediumCpu)
    return KvTier::kHost;
  if (medium == kvx::kMediumDisk)
    return KvTier::kDisk;
  return std::nullopt;
}

PrefixIndex::EndpointId PrefixIndex::Intern(const std::string& endpoint) {
  auto [it, inserted] = ids_.try_emplace(endpoint, static_cast<EndpointId>(endpoints_.size()));
  if (inserted) {
    endpoints_.emplace_back();
    endpoints_.back().name = endpoint;
  }
  return it->second;
}

void PrefixIndex::Drop(EndpointId id, uint64_t key, KvTier tier) {
  auto h = holders_.find(key);
  if (h == holders_.end())
    return;
  std::vector<Holder>& v = h->second;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->id != id)
      continue;
    it->tiers = static_cast<TierMask>(it->tiers & ~KvTierBit(tier));
    if (it->tiers == 0)
      v.erase(it);
    break;
  }
  if (v.empty())
    holders_.erase(h);
}

void PrefixIndex::Trim(EndpointId id, KvTier tier) {
  PerEndpoint& e = endpoints_[id];
  TierKeys& keys = e.tiers[Index(tier)];
  const size_t cap = tier == KvTier::kPool && e.capacity > 0 ? e.capacity : default_capacity_;
  while (keys.lru.size() > cap) {
    const uint64_t key = keys.lru.front();
    keys.lru.pop_front();
    keys.where.erase(key);
    Drop(id, key, tier);
  }
}

void PrefixIndex::SetCapacity(const std::string& endpoint, size_t capacity) {
  base::MutexLock lock(&mu_);
  const EndpointId id = Intern(endpoint);
  endpoints_[id].capacity = capacity;
  Trim(id, KvTier::kPool);
}

void PrefixIndex::Add(const std::string& endpoint, std::span<const uint64_t> keys, KvTier tier) {
  base::MutexLock lock(&mu_);
  const EndpointId id = Intern(endpoint);
  TierKeys& held = endpoints_[id].tiers[Index(tier)];
  for (uint64_t key : keys) {
    auto it = held.where.find(key);
    if (it != held.where.end()) {
      held.lru.splice(held.lru.end(), held.lru, it->second);
      continue;
    }
    held.lru.push_back(key);
    held.where.emplace(key, std::prev(held.lru.end()));
    std::vector<Holder>& holders = holders_[key];
    auto holder =
        std::find_if(holders.begin(), holders.end(), [id](const Holder& h) { return h.id == id; });
    if (holder == holders.end())
      holders.push_back({id, KvTierBit(tier)});
    else
      holder->tiers = static_cast<TierMask>(holder->tiers | KvTierBit(tier));
  }
  Trim(id, tier);
}

void PrefixIndex::Remove(const std::string& endpoint, std::span<const uint64_t> keys, KvTier tier) {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  if (found == ids_.end())
    return;
  TierKeys& held = endpoints_[found->second].tiers[Index(tier)];
  for (uint64_t key : keys) {
    auto it = held.where.find(key);
    if (it == held.where.end())
      continue;
    held.lru.erase(it->second);
    held.where.erase(it);
    Drop(found->second, key, tier);
  }
}

void PrefixIndex::RemoveEndpoint(const std::string& endpoint) {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  if (found == ids_.end())
    return;
  PerEndpoint& e = endpoints_[found->second];
  for (size_t t = 0; t < kNumKvTiers; ++t) {
    for (uint64_t key : e.tiers[t].lru)
      Drop(found->second, key, static_cast<KvTier>(t));
    e.tiers[t].lru.clear();
    e.tiers[t].where.clear();
  }
}

std::vector<PrefixIndex::EndpointMatch> PrefixIndex::Match(std::span<const uint64_t> keys,
                                                           const KvTierWeights& weights) const {
  // The best weight of a block held in the tiers of `mask`.
  auto weight = [&weights](TierMask mask) {
    double best = 0;
    for (size_t t = 0; t < kNumKvTiers; ++t) {
      if ((mask & (1u << t)) != 0)
        best = std::max(best, weights[t]);
    }
    return best;
  };
  base::MutexLock lock(&mu_);
  std::vector<EndpointMatch> out;
  if (keys.empty())
    return out;
  auto first = holders_.find(keys[0]);
  if (first == holders_.end())
    return out;
  // Endpoints still matching, and the result slot of each.
  std::vector<std::pair<EndpointId, size_t>> alive;
  const auto in_pool = [](TierMask mask) { return (mask & KvTierBit(KvTier::kPool)) != 0; };
  for (const Holder& h : first->second) {
    alive.emplace_back(h.id, out.size());
    out.push_back({endpoints_[h.id].name, 1, weight(h.tiers), in_pool(h.tiers) ? 1u : 0u});
  }
  for (size_t i = 1; i < keys.size() && !alive.empty(); ++i) {
    auto h = holders_.find(keys[i]);
    if (h == holders_.end())
      break;
    const std::vector<Holder>& holders = h->second;
    size_t kept = 0;
    for (const auto& [id, slot] : alive) {
      auto holder = std::find_if(holders.begin(), holders.end(),
                                 [id = id](const Holder& x) { return x.id == id; });
      if (holder != holders.end()) {
        EndpointMatch& m = out[slot];
        m.blocks = i + 1;
        m.weighted_blocks += weight(holder->tiers);
        if (m.pool_blocks == i && in_pool(holder->tiers))
          m.pool_blocks = i + 1;
        alive[kept++] = {id, slot};
      }
    }
    alive.resize(kept);
  }
  return out;
}

size_t PrefixIndex::num_keys(const std::string& endpoint, KvTier tier) const {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  return found == ids_.end() ? 0 : endpoints_[found->second].tiers[Index(tier)].lru.size();
}

}  // namespace switchyard::router
