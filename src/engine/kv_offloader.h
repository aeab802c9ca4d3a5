// KvOffloader: the KV tiers under the engine's pool (vLLM's native OffloadingConnector,
// `--kv-offloading-size`): a host-memory tier and, optionally, a disk tier beside it
// (`--kv-offloading-disk-path`) and a remote tier on Redis shared with other engines
// (`--kv-offloading-redis`), driven by the engine loop:
//
//  - store (write-behind): a cached full block whose last reference goes is copied to each
//    tier that lacks it before the pool can hand it out again, when it was looked up at
//    least store_threshold times (vLLM's `store_threshold`; prompts' blocks are counted at
//    admission, so generated blocks are only stored once a later prompt repeats them). The
//    loop pins the blocks StartStores names (once per tier copying them) until TakeFinished
//    hands them back.
//  - load: an admitted prompt whose prefix runs on past the pool's hit into the tiers loads
//    those blocks (each from the host tier when it has it, else from disk) into blocks of
//    its own (KvCacheManager::BeginLoad), then as many of the following blocks as Redis
//    holds (what Redis holds is only known by asking it, so those are looked for as part of
//    the load), and waits, as a loading request, while the other requests run. A failed
//    load (a corrupt disk entry, Redis gone) is a fallback to compute.
//
// Copies run on the transfer engine's threads (host) and the disk and Redis stores' threads,
// never on the loop: completions are queued and `wake` is called; the loop collects them with
// TakeFinished. A tier slot being written is never read and one being read is never
// rewritten (kvx::BlockTierIndex). Tier changes come out as KV events of medium "CPU" or
// "DISK" (TakeEvents); Redis, shared and evicting on its own, publishes none.
//
// Threads: every method is for the engine loop; `wake` runs on copy threads. The destructor
// finishes or cancels what is queued and joins; the pool's memory must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
#include "kvx/disk_block_store.h"
#include "kvx/kv_compatibility.h"
#include "kvx/kv_events.h"
#include "kvx/memory_region.h"
#include "kvx/redis_block_store.h"
#include "kvx/shared_host_tier.h"
#include "kvx/shared_memory_region.h"
#include "kvx/transfer_engine.h"

namespace switchyard::engine {

struct KvOffloadOptions {
  // The tier's memory (--kv-offloading-size); it holds floor(bytes / block bytes) blocks.
  int64_t capacity_bytes = 0;
  // Store only blocks looked up at least this many times. REQUIRES: >= 1.
  int32_t store_threshold = 1;
  int num_transfer_threads = 1;
  // A disk tier as well (--kv-offloading-disk-path / -disk-size): the directory its entries
  // go under, empty for none, and its size, floor(bytes / block bytes) blocks.
  std::string disk_path;
  int64_t disk_capacity_bytes = 0;
  int num_disk_threads = 2;
  // A remote tier on Redis as well (--kv-offloading-redis HOST:PORT): empty host for none.
  std::string redis_host;
  int redis_port = 6379;
  int num_redis_threads = 2;
  // Shares the host tier with every engine on this host that opens the same name
  // (--kv-offloading-shared, kvx::SharedHostTier); empty: a tier of this engine's own.
  std::string shared_host_tier;
  // Names the weights in the KV compatibility the disk and Redis entries carry (Redis keys
  // are namespaced by it).
  std::string model_fingerprint;
};

class KvOffloader {
 public:
  using Clock = std::chrono::steady_clock;

  // Maps the host tier's memory, opens the disk and Redis tiers and starts their threads.
  // `pool` is the runner's KV memory, `block_size` its tokens per block and `compatibility`
  // what its blocks are (checked on every disk and Redis read; Redis keys are namespaced by
  // it, model fingerprint included). InvalidArgument when a tier holds no block; the
  // system's error when the disk directory cannot be made; Unavailable when Redis does not
  // answer.
  static absl::StatusOr<std::unique_ptr<KvOffloader>> Start(
      const KvOffloadOptions& options, kvx::MemoryRegion pool, int32_t block_size,
      const kvx::KvCompatibility& compatibility, std::function<void()> wake);
  ~KvOffloader();
  KvOffloader(const KvOffloader&) = delete;
  KvOffloader& operator=(const KvOffloader&) = delete;

  // Admission of a prompt whose full blocks hash to `hashes`, the first `num_cached` of them
  // in the pool: counts one lookup of every block (store threshold, hit rates) and says how
  // many of the blocks after the pool's hit the host and disk tiers can load now (`local`)
  // and how many after those to look for in Redis (`remote`: all the rest, 0 without it).
  struct LookupResult {
    int32_t local = 0;
    int32_t remote = 0;
  };
  LookupResult Lookup(std::span<const BlockHash> hashes, int32_t num_cached);
  // Lookup's answer without counting anything: for a prompt already looked up once whose load
  // is tried again.
  LookupResult Find(std::span<const BlockHash> hashes, int32_t num_cached) const;
  // Copies the tiers' blocks `hashes` into `local_blocks` (same length) for `seq`: the last
  // `num_remote` from Redis, as many of them as it holds, the others from the host or disk
  // tier. The outcome comes back from TakeFinished. False, with nothing started, when a
  // block is no longer readable or the transfer queue is full.
  bool StartLoad(SeqId seq, std::span<const BlockHash> hashes,
                 std::span<const BlockId> local_blocks, int32_t num_remote);
  // Starts storing the released blocks that pass the threshold in each tier that lacks them,
  // while it has room; returns the pool blocks being read, once per tier reading them, which
  // the caller pins until TakeFinished returns them.
  std::vector<BlockId> StartStores(std::span<const KvCacheManager::ReleasedBlock> released);

  struct Finished {
    // Pool blocks the tier has finished reading: unpin them.
    std::vector<BlockId> unpin;
    struct Load {
      SeqId seq = 0;
      // The leading blocks loaded: those of the host and disk tiers and the run Redis held,
      // or 0 after a failure.
      int32_t num_loaded = 0;
    };
    std::vector<Load> loads;
  };
  Finished TakeFinished();
  // Whether copies are in flight (stores pinning pool blocks, loads filling them).
  bool busy() const { return !jobs_.empty(); }
  // BlockStored / BlockRemoved of the tiers' media since the last call.
  std::vector<kvx::KvCacheEvent> TakeEvents();

  // The host tier's, then the disk tier's, then Redis's (whose capacity and use are not
  // known here: 0).
  std::vector<KvTierStats> stats() const;
  // Changes whenever stats() may have: a lookup, a copy started or finished. (Blocks that
  // other engines put in a shared host tier show in used_blocks at this engine's next
  // change.) Lets the loop skip publishing unchanged stats every step.
  uint64_t generation() const { return generation_; }

 private:
  enum class Medium { kHost, kDisk, kRedis };
  struct Tier {
    // `index`: the tier's own (made here when null) or, for Redis, which keeps its own,
    // none (num_slots 0).
    Tier(int64_t num_slots, const char* medium, size_t block_bytes,
         kvx::BlockTierIndex* shared_index = nullptr);
    std::unique_ptr<kvx::BlockTierIndex> own_index;
    kvx::BlockTierIndex* index;
    KvTierStats stats;
  };
  struct Job {
    Medium medium = Medium::kHost;
    bool is_store = false;
    SeqId seq = 0;  // loads
    std::vector<BlockId> blocks{};
    std::vector<int64_t> slots{};  // host and disk
    std::vector<BlockHash> hashes{};
    Clock::time_point posted{};
  };
  struct Done {
    uint64_t job = 0;
    // One per block.
    std::vector<absl::Status> results;
    double seconds = 0;
  };
  // A sequence's load: its parts still copying, and how each went.
  struct PendingLoad {
    int parts = 0;
    bool ok = true;
    int32_t host_blocks = 0;
    int32_t disk_blocks = 0;
    // Redis's part: its blocks, and the leading run it held.
    int32_t redis_blocks = 0;
    int32_t redis_found = 0;
  };

  // The host tier's memory: a private memfd, or a tier shared with other engines.
  struct HostMemory {
    std::optional<kvx::SharedMemoryRegion> own;
    std::unique_ptr<kvx::SharedHostTier> shared;
    std::span<std::byte> blocks() const { return shared ? shared->blocks() : own->bytes(); }
  };

  KvOffloader(const KvOffloadOptions& options, HostMemory memory, int64_t host_slots,
              int64_t disk_slots, int32_t block_size, size_t block_bytes,
              std::function<void()> wake);
  Tier& TierOf(Medium medium);
  // The tiers there are: host, then disk and Redis when configured.
  std::vector<Tier*> Tiers() { return TiersOf<Tier>(*this); }
  std::vector<const Tier*> Tiers() const { return TiersOf<const Tier>(*this); }
  template <typename T, typename Self>
  static std::vector<T*> TiersOf(Self& self);
  // Adds the released blocks `tier` lacks to `job` (a store), while it has room.
  void CollectStores(std::span<const KvCacheManager::ReleasedBlock> released, Tier& tier, Job& job);
  // Posts the job's copies: pool -> tier for a store, tier -> pool for a load. False when
  // the transfer queue refused it (its slots are then given back).
  bool Post(Job job);
  void OnDone(uint64_t job, std::vector<absl::Status> results, Clock::time_point posted);
  // The loop's side of a finished job.
  void FinishStore(Job& job, const Done& done, Finished& finished);
  void FinishLoad(Job& job, const Done& done, Finished& finished);

  const KvOffloadOptions options_;
  const int32_t block_size_;
  const size_t block_bytes_;
  const std::function<void()> wake_;
  HostMemory memory_;

  // Loop thread only.
  Tier host_;
  std::unique_ptr<Tier> disk_;
  std::unique_ptr<Tier> redis_;
  kvx::BlockLookupCounter lookups_;
  // Blocks lately written to Redis (successfully), not written again while remembered.
  kvx::BlockLookupCounter redis_written_;
  absl::flat_hash_map<uint64_t, Job> jobs_;
  absl::flat_hash_map<SeqId, PendingLoad> pending_loads_;
  uint64_t next_job_ = 1;
  uint64_t generation_ = 0;
  std::vector<kvx::KvCacheEvent> events_;

  base::Mutex mu_;
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);

  // Last: destroyed first (they run or cancel what is queued, and join), while their
  // callbacks still find everything above.
  std::unique_ptr<kvx::DiskBlockStore> disk_store_;
  std::unique_ptr<kvx::RedisBlockStore> redis_store_;
  kvx::TransferEngine transfers_;
  kvx::BlockListHandle pool_table_;
  kvx::BlockListHandle tier_table_;
};

}  // namespace switchyard::engine
