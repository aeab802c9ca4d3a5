#include "kvx/block_lookup_counter.h"

#include "base/logging.h"

namespace switchyard::kvx {

BlockLookupCounter::BlockLookupCounter(int64_t capacity) : capacity_(capacity) {
  SY_CHECK(capacity >= 1);
}

int64_t BlockLookupCounter::Add(const Key& key) {
  auto it = counts_.find(key);
  if (it != counts_.end()) {
    recency_.splice(recency_.begin(), recency_, it->second);
    return ++it->second->second;
  }
  if (size() == capacity_) {
    counts_.erase(recency_.back().first);
    recency_.pop_back();
  }
  recency_.emplace_front(key, 1);
  counts_.emplace(key, recency_.begin());
  return 1;
}

int64_t BlockLookupCounter::Count(const Key& key) const {
  auto it = counts_.find(key);
  return it == counts_.end() ? 0 : it->second->second;
}

}  // namespace switchyard::kvx
