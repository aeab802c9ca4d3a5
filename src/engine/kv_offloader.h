// KvOffloader: the host-memory KV tier under the engine's pool (vLLM's native
// OffloadingConnector, `--kv-offloading-size`), driven by the engine loop:
//
//  - store (write-behind): a cached full block whose last reference goes is copied to the
//    tier before the pool can hand it out again, when it was looked up at least
//    store_threshold times (vLLM's `store_threshold`; prompts' blocks are counted at
//    admission, so generated blocks are only stored once a later prompt repeats them). The
//    loop pins the blocks StartStores names until TakeFinished hands them back.
//  - load: an admitted prompt whose prefix runs on past the pool's hit into the tier loads
//    those blocks into blocks of its own (KvCacheManager::BeginLoad) and waits, as a
//    loading request, while the other requests run; a failed load is a fallback to compute.
//
// Copies run on the transfer engine's threads, never on the loop: completions are queued
// and `wake` is called; the loop collects them with TakeFinished. A tier slot being written
// is never read and one being read is never rewritten (kvx::BlockTierIndex). Tier changes
// come out as KV events of medium "CPU" (TakeEvents).
//
// Threads: every method is for the engine loop; `wake` runs on transfer threads. The
// destructor cancels what is queued and joins; the pool's memory must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "engine/kv_cache_manager.h"
#include "engine/kv_tier_stats.h"
#include "kvx/block_lookup_counter.h"
#include "kvx/block_tier_index.h"
#include "kvx/kv_events.h"
#include "kvx/memory_region.h"
#include "kvx/shared_memory_region.h"
#include "kvx/transfer_engine.h"

namespace switchyard::engine {

struct KvOffloadOptions {
  // The tier's memory (--kv-offloading-size); it holds floor(bytes / block bytes) blocks.
  int64_t capacity_bytes = 0;
  // Store only blocks looked up at least this many times. REQUIRES: >= 1.
  int32_t store_threshold = 1;
  int num_transfer_threads = 1;
};

class KvOffloader {
 public:
  using Clock = std::chrono::steady_clock;

  // Maps the tier's memory and starts the transfer threads. `pool` is the runner's KV memory
  // and `block_size` its tokens per block. InvalidArgument when the tier holds no block.
  static absl::StatusOr<std::unique_ptr<KvOffloader>> Start(const KvOffloadOptions& options,
                                                            kvx::MemoryRegion pool,
                                                            int32_t block_size,
                                                            std::function<void()> wake);
  ~KvOffloader();
  KvOffloader(const KvOffloader&) = delete;
  KvOffloader& operator=(const KvOffloader&) = delete;

  // Admission of a prompt whose full blocks hash to `hashes`, the first `num_cached` of them
  // in the pool: counts one lookup of every block (store threshold, hit rate) and returns
  // how many of the blocks after the pool's hit the tier can load now.
  int32_t Lookup(std::span<const BlockHash> hashes, int32_t num_cached);
  // Copies the tier's blocks `hashes` into `local_blocks` (same length) for `seq`; the
  // outcome comes back from TakeFinished. False, with nothing started, when a block is no
  // longer readable or the transfer queue is full.
  bool StartLoad(SeqId seq, std::span<const BlockHash> hashes,
                 std::span<const BlockId> local_blocks);
  // Starts storing the released blocks that pass the threshold and the tier lacks, while
  // the tier has room; returns the pool blocks being read, which the caller pins until
  // TakeFinished returns them.
  std::vector<BlockId> StartStores(std::span<const KvCacheManager::ReleasedBlock> released);

  struct Finished {
    // Pool blocks the tier has finished reading: unpin them.
    std::vector<BlockId> unpin;
    struct Load {
      SeqId seq = 0;
      // The loaded blocks: all of them, or 0 after a failure.
      int32_t num_loaded = 0;
    };
    std::vector<Load> loads;
  };
  Finished TakeFinished();
  // BlockStored / BlockRemoved of medium "CPU" since the last call.
  std::vector<kvx::KvCacheEvent> TakeEvents();

  KvTierStats stats() const;

 private:
  struct Job {
    bool is_store = false;
    SeqId seq = 0;  // loads
    std::vector<BlockId> blocks;
    std::vector<int64_t> slots;
    std::vector<BlockHash> hashes;  // stores
    Clock::time_point posted;
  };
  struct Done {
    uint64_t job = 0;
    bool ok = false;
    double seconds = 0;
  };

  KvOffloader(const KvOffloadOptions& options, kvx::SharedMemoryRegion memory, int64_t num_slots,
              int32_t block_size, size_t block_bytes, std::function<void()> wake);
  // Posts a copy for `job` (pool -> tier for a store, tier -> pool for a load).
  bool Post(Job job);
  void OnDone(uint64_t job, kvx::TransferState state, Clock::time_point posted);

  const KvOffloadOptions options_;
  const int32_t block_size_;
  const size_t block_bytes_;
  const std::function<void()> wake_;
  kvx::SharedMemoryRegion memory_;

  // Loop thread only.
  kvx::BlockTierIndex index_;
  kvx::BlockLookupCounter lookups_;
  absl::flat_hash_map<uint64_t, Job> jobs_;
  uint64_t next_job_ = 1;
  std::vector<kvx::KvCacheEvent> events_;
  KvTierStats stats_;

  base::Mutex mu_;
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);

  // Last: destroyed first, its callbacks still find everything above.
  kvx::TransferEngine transfers_;
  kvx::BlockListHandle pool_table_;
  kvx::BlockListHandle tier_table_;
};

}  // namespace switchyard::engine
