// Test support for the transfer engine's tests: KV memory in the two shapes a region
// describes, filled with seeded random bytes, and a log of transfer callbacks that tests
// wait on (no sleeps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "base/mutex.h"
#include "kvx/kv_block_layout.h"
#include "kvx/memory_region.h"
#include "kvx/transfer_handle.h"

namespace switchyard::kvx {

inline void FillRandom(std::span<std::byte> bytes, uint32_t seed) {
  std::mt19937 random(seed);
  for (std::byte& b : bytes)
    b = static_cast<std::byte>(random() & 0xff);
}

// One pool per segment, as the engine's KvCacheStorage holds them.
struct PoolMemory {
  PoolMemory(const KvBlockLayout& layout, int32_t num_blocks, uint32_t seed) {
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      pools.emplace_back(layout.segment_bytes(s) * static_cast<size_t>(num_blocks));
      FillRandom(pools.back(), seed + static_cast<uint32_t>(s));
    }
    region.emplace(*MemoryRegion::ForPools(layout, {pools.begin(), pools.end()}, num_blocks));
  }
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  // Block `block`'s segment `segment`, located without MemoryRegion's formula.
  std::span<std::byte> Segment(const KvBlockLayout& layout, int32_t block, size_t segment) {
    const size_t bytes = layout.segment_bytes(segment);
    return std::span(pools[segment]).subspan(static_cast<size_t>(block) * bytes, bytes);
  }
  // Block `block`'s bytes, segment after segment.
  std::vector<std::byte> BlockBytes(const KvBlockLayout& layout, int32_t block) {
    std::vector<std::byte> bytes;
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      const std::span<std::byte> segment = Segment(layout, block, s);
      bytes.insert(bytes.end(), segment.begin(), segment.end());
    }
    return bytes;
  }

  std::vector<std::vector<std::byte>> pools;
  std::optional<MemoryRegion> region;
};

// Whole blocks back to back, as a host tier stores them.
struct InterleavedMemory {
  InterleavedMemory(const KvBlockLayout& layout, int32_t num_blocks, uint32_t seed)
      : store(layout.block_bytes() * static_cast<size_t>(num_blocks)) {
    FillRandom(store, seed);
    region.emplace(*MemoryRegion::ForInterleaved(layout, store, num_blocks));
  }
  InterleavedMemory(const InterleavedMemory&) = delete;
  InterleavedMemory& operator=(const InterleavedMemory&) = delete;

  std::span<std::byte> Segment(const KvBlockLayout& layout, int32_t block, size_t segment) {
    return std::span(store).subspan(
        static_cast<size_t>(block) * layout.block_bytes() + layout.segment_offset(segment),
        layout.segment_bytes(segment));
  }

  std::vector<std::byte> store;
  std::optional<MemoryRegion> region;
};

// Records each callback under the id given to Callback(id); thread-safe.
class CallbackLog {
 public:
  TransferCallback Callback(int id) {
    return [this, id](TransferState state, const absl::Status& status) {
      base::MutexLock lock(&mu_);
      calls_[id].push_back({state, status});
      ++total_;
      cv_.NotifyAll();
    };
  }

  // Blocks until `n` callbacks in all have run.
  void WaitForCalls(size_t n) {
    base::MutexLock lock(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return total_ >= n; });
  }

  std::vector<TransferStatus> Calls(int id) {
    base::MutexLock lock(&mu_);
    return calls_[id];
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::map<int, std::vector<TransferStatus>> calls_ ABSL_GUARDED_BY(mu_);
  size_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

// A one-shot latch: Wait blocks until Open has been called.
class Gate {
 public:
  void Open() {
    base::MutexLock lock(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }
  void Wait() {
    base::MutexLock lock(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_; });
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::kvx
