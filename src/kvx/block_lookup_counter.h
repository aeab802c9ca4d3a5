// BlockLookupCounter: how many times each recent block key was looked up, for a tier's
// store threshold (vLLM's offloading `store_threshold`: store only blocks looked up at least
// N times, so that one-off prompts do not churn the tier). It remembers the `capacity` most
// recently looked-up keys (vLLM keeps 64,000); an older key's count starts again from 0.
//
// Not thread-safe: one owner (the engine loop) makes every call.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace switchyard::kvx {

class BlockLookupCounter {
 public:
  using Key = std::array<uint8_t, 32>;
  static constexpr int64_t kDefaultCapacity = 64000;

  // REQUIRES: capacity >= 1.
  explicit BlockLookupCounter(int64_t capacity = kDefaultCapacity);

  BlockLookupCounter(const BlockLookupCounter&) = delete;
  BlockLookupCounter& operator=(const BlockLookupCounter&) = delete;

  // Counts one lookup of `key` (making it the most recent) and returns its count.
  int64_t Add(const Key& key);
  // The key's count, 0 when forgotten or never seen; changes nothing.
  int64_t Count(const Key& key) const;

  int64_t size() const { return static_cast<int64_t>(counts_.size()); }

 private:
  const int64_t capacity_;
  // Most recent first.
  std::list<std::pair<Key, int64_t>> recency_;
  absl::flat_hash_map<Key, std::list<std::pair<Key, int64_t>>::iterator> counts_;
};

}  // namespace switchyard::kvx
