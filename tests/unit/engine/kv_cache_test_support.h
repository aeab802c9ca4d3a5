// Helpers shared by the KV cache manager's tests: token lists and managers with the options
// those tests vary (seeded hashes and events always on, so stored/removed events can be checked).
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"

namespace switchyard::engine {

// start, start + 1, ..., start + n - 1.
inline std::vector<int32_t> Iota(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// A manager of `num_blocks` blocks of `block_size` tokens, hash seed "0", events enabled;
// `window` 0 is full attention; `track_released` keeps released blocks for
// TakeReleasedBlocks. Fails the test (and returns null) when creation fails.
inline std::unique_ptr<KvCacheManager> MakeKvCacheManager(int32_t num_blocks, int32_t block_size,
                                                          int32_t window = 0, bool caching = true,
                                                          bool track_released = false) {
  KvCacheOptions options;
  options.num_blocks = num_blocks;
  options.block_size = block_size;
  options.enable_prefix_caching = caching;
  options.hash_seed = "0";
  options.enable_events = true;
  options.sliding_window = window;
  options.track_released_blocks = track_released;
  auto manager = KvCacheManager::Create(options);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return manager.ok() ? std::move(*manager) : nullptr;
}

}  // namespace switchyard::engine
