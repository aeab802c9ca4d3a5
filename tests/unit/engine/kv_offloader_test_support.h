// Test support for KvOffloader's tests: block hashes, a counter of the offloader's wake calls
// that tests wait on (no sleeps), and a pool block's bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "../kvx/transfer_test_memory.h"
#include "base/mutex.h"
#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "kvx/kv_block_layout.h"

namespace switchyard::engine {

inline BlockHash H(uint8_t n) {
  BlockHash hash;
  hash.bytes[0] = n;
  hash.bytes[31] = 0x5a;
  return hash;
}

// Counts the offloader's wake calls, so that tests wait for completions without sleeping.
class WakeCounter {
 public:
  std::function<void()> Callback() {
    return [this] {
      base::MutexLock lock(&mu_);
      ++count_;
      cv_.NotifyAll();
    };
  }
  // Whether `n` wakes in all came within a generous deadline.
  bool WaitFor(int64_t n) {
    base::MutexLock lock(&mu_);
    return cv_.WaitUntil(&mu_, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ >= n; });
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// New bytes in the block, as when the pool hands it to another sequence.
inline void OverwriteBlock(kvx::PoolMemory& pool, const kvx::KvBlockLayout& layout, BlockId block,
                           uint32_t seed) {
  for (size_t s = 0; s < layout.num_segments(); ++s)
    kvx::FillRandom(pool.Segment(layout, block, s), seed + static_cast<uint32_t>(s));
}

}  // namespace switchyard::engine
