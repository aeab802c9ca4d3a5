// PrefixIndex: which endpoints hold which prefix keys (block_keys.h), with one LRU of
// keys per endpoint bounded by its capacity (its KV cache's block count when known), as
// llm-d's approximate index keeps it. Match walks a request's key chain from the start and
// reports, per endpoint, how many leading blocks it holds (the greedy longest prefix).
//
// Thread-safe: one mutex; Match is a few hash lookups per block. Endpoints are named by
// strings and interned to small ids internally.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"

namespace switchyard::router {

class PrefixIndex {
 public:
  // REQUIRES: default_capacity > 0.
  explicit PrefixIndex(size_t default_capacity) : default_capacity_(default_capacity) {}

  // Bounds an endpoint's LRU (0 restores the default); trims at once.
  void SetCapacity(const std::string& endpoint, size_t capacity);
  // Records that `endpoint` holds `keys` (most recent last), evicting its least recently
  // used keys beyond capacity.
  void Add(const std::string& endpoint, std::span<const uint64_t> keys);
  void Remove(const std::string& endpoint, std::span<const uint64_t> keys);
  void RemoveEndpoint(const std::string& endpoint);

  struct EndpointMatch {
    std::string endpoint;
    size_t blocks = 0;  // leading keys held
  };
  // Endpoints holding at least the first key, with their matched prefix lengths.
  std::vector<EndpointMatch> Match(std::span<const uint64_t> keys) const;

  size_t num_keys(const std::string& endpoint) const;

 private:
  using EndpointId = uint32_t;
  struct PerEndpoint {
    std::string name;
    size_t capacity = 0;      // 0: default
    std::list<uint64_t> lru;  // front: least recent
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> where;
  };

  EndpointId Intern(const std::string& endpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Trim(EndpointId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(EndpointId id, uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t default_capacity_;
  mutable base::Mutex mu_;
  absl::flat_hash_map<std::string, EndpointId> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<PerEndpoint> endpoints_ ABSL_GUARDED_BY(mu_);
  // key -> endpoints holding it (small; usually a handful).
  absl::flat_hash_map<uint64_t, std::vector<EndpointId>> holders_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
