#include "router/prefix/prefix_index.h"

#include <algorithm>

namespace switchyard::router {

PrefixIndex::EndpointId PrefixIndex::Intern(const std::string& endpoint) {
  auto [it, inserted] = ids_.try_emplace(endpoint, static_cast<EndpointId>(endpoints_.size()));
  if (inserted) {
    endpoints_.emplace_back();
    endpoints_.back().name = endpoint;
  }
  return it->second;
}

void PrefixIndex::Drop(EndpointId id, uint64_t key) {
  auto h = holders_.find(key);
  if (h == holders_.end())
    return;
  std::vector<EndpointId>& v = h->second;
  v.erase(std::remove(v.begin(), v.end(), id), v.end());
  if (v.empty())
    holders_.erase(h);
}

void PrefixIndex::Trim(EndpointId id) {
  PerEndpoint& e = endpoints_[id];
  const size_t cap = e.capacity > 0 ? e.capacity : default_capacity_;
  while (e.lru.size() > cap) {
    const uint64_t key = e.lru.front();
    e.lru.pop_front();
    e.where.erase(key);
    Drop(id, key);
  }
}

void PrefixIndex::SetCapacity(const std::string& endpoint, size_t capacity) {
  base::MutexLock lock(&mu_);
  const EndpointId id = Intern(endpoint);
  endpoints_[id].capacity = capacity;
  Trim(id);
}

void PrefixIndex::Add(const std::string& endpoint, std::span<const uint64_t> keys) {
  base::MutexLock lock(&mu_);
  const EndpointId id = Intern(endpoint);
  PerEndpoint& e = endpoints_[id];
  for (uint64_t key : keys) {
    auto it = e.where.find(key);
    if (it != e.where.end()) {
      e.lru.splice(e.lru.end(), e.lru, it->second);
      continue;
    }
    e.lru.push_back(key);
    e.where.emplace(key, std::prev(e.lru.end()));
    holders_[key].push_back(id);
  }
  Trim(id);
}

void PrefixIndex::Remove(const std::string& endpoint, std::span<const uint64_t> keys) {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  if (found == ids_.end())
    return;
  PerEndpoint& e = endpoints_[found->second];
  for (uint64_t key : keys) {
    auto it = e.where.find(key);
    if (it == e.where.end())
      continue;
    e.lru.erase(it->second);
    e.where.erase(it);
    Drop(found->second, key);
  }
}

void PrefixIndex::RemoveEndpoint(const std::string& endpoint) {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  if (found == ids_.end())
    return;
  PerEndpoint& e = endpoints_[found->second];
  for (uint64_t key : e.lru)
    Drop(found->second, key);
  e.lru.clear();
  e.where.clear();
}

std::vector<PrefixIndex::EndpointMatch> PrefixIndex::Match(std::span<const uint64_t> keys) const {
  base::MutexLock lock(&mu_);
  std::vector<EndpointMatch> out;
  if (keys.empty())
    return out;
  auto first = holders_.find(keys[0]);
  if (first == holders_.end())
    return out;
  // Endpoints still matching, and the result slot of each.
  std::vector<std::pair<EndpointId, size_t>> alive;
  for (EndpointId id : first->second) {
    alive.emplace_back(id, out.size());
    out.push_back({endpoints_[id].name, 1});
  }
  for (size_t i = 1; i < keys.size() && !alive.empty(); ++i) {
    auto h = holders_.find(keys[i]);
    if (h == holders_.end())
      break;
    const std::vector<EndpointId>& holders = h->second;
    size_t kept = 0;
    for (const auto& [id, slot] : alive) {
      if (std::find(holders.begin(), holders.end(), id) != holders.end()) {
        out[slot].blocks = i + 1;
        alive[kept++] = {id, slot};
      }
    }
    alive.resize(kept);
  }
  return out;
}

size_t PrefixIndex::num_keys(const std::string& endpoint) const {
  base::MutexLock lock(&mu_);
  auto found = ids_.find(endpoint);
  return found == ids_.end() ? 0 : endpoints_[found->second].lru.size();
}

}  // namespace switchyard::router
