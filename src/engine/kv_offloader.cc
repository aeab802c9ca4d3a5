#include "engine/kv_offloader.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"

namespace switchyard::engine {
namespace {

kvx::BlockTierIndex::Key KeyOf(const BlockHash& hash) {
  return hash.bytes;
}

std::vector<int32_t> Iota(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// Blocks of `block_bytes` in `bytes` (at most int32's range: block ids are int32).
absl::StatusOr<int64_t> NumSlots(int64_t bytes, size_t block_bytes, const char* flag) {
  const int64_t n = std::min<int64_t>(bytes / static_cast<int64_t>(block_bytes),
                                      std::numeric_limits<int32_t>::max());
  if (n < 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} bytes hold no KV block ({} bytes each)", flag, bytes, block_bytes));
  }
  return n;
}

// Queues `ops` on a disk or Redis store: a write for a store job, a read for a load.
template <typename Store>
void Submit(Store& store, bool is_store, std::vector<typename Store::Op> ops,
            typename Store::Callback done) {
  if (is_store) {
    store.Write(std::move(ops), std::move(done));
  } else {
    store.Read(std::move(ops), std::move(done));
  }
}

kvx::KvCacheEvent Removed(const kvx::BlockTierIndex::Key& key, const char* medium) {
  kvx::BlockRemoved removed;
  removed.block_hashes.push_back(kvx::EventHash::FromBytes(key));
  removed.medium = medium;
  return removed;
}

}  // namespace

KvOffloader::Tier::Tier(int64_t num_slots, const char* medium, size_t block_bytes,
                        kvx::BlockTierIndex* shared_index)
    : own_index(shared_index == nullptr && num_slots > 0
                    ? std::make_unique<kvx::BlockTierIndex>(num_slots)
                    : nullptr),
      index(shared_index != nullptr ? shared_index : own_index.get()) {
  stats.medium = medium;
  stats.capacity_blocks = num_slots;
  stats.block_bytes = static_cast<int64_t>(block_bytes);
}

absl::StatusOr<std::unique_ptr<KvOffloader>> KvOffloader::Start(
    const KvOffloadOptions& options, kvx::MemoryRegion pool, int32_t block_size,
    const kvx::KvCompatibility& compatibility, std::function<void()> wake) {
  SY_CHECK(options.store_threshold >= 1);
  const size_t block_bytes = pool.layout().block_bytes();
  SY_ASSIGN_OR_RETURN(const int64_t host_slots,
                      NumSlots(options.capacity_bytes, block_bytes, "--kv-offloading-size"));
  int64_t disk_slots = 0;
  if (!options.disk_path.empty()) {
    SY_ASSIGN_OR_RETURN(disk_slots, NumSlots(options.disk_capacity_bytes, block_bytes,
                                             "--kv-offloading-disk-size"));
  }
  HostMemory memory;
  if (options.shared_host_tier.empty()) {
    SY_ASSIGN_OR_RETURN(
        memory.own, kvx::SharedMemoryRegion::Create(static_cast<size_t>(host_slots) * block_bytes,
                                                    "switchyard-kv-host-tier"));
  } else {
    SY_ASSIGN_OR_RETURN(memory.shared,
                        kvx::SharedHostTier::Open(options.shared_host_tier, host_slots, block_bytes,
                                                  compatibility.Digest()));
  }
  SY_ASSIGN_OR_RETURN(kvx::MemoryRegion tier, kvx::MemoryRegion::ForInterleaved(
                                                  pool.layout(), memory.blocks(), host_slots));
  std::unique_ptr<KvOffloader> offloader(new KvOffloader(options, std::move(memory), host_slots,
                                                         disk_slots, block_size, block_bytes,
                                                         std::move(wake)));
  if (!options.disk_path.empty()) {
    kvx::DiskBlockStoreOptions disk;
    disk.directory = options.disk_path;
    disk.num_threads = options.num_disk_threads;
    disk.compatibility = compatibility.Digest();
    SY_ASSIGN_OR_RETURN(offloader->disk_store_, kvx::DiskBlockStore::Open(disk, pool));
  }
  if (!options.redis_host.empty()) {
    kvx::RedisBlockStoreOptions redis;
    redis.host = options.redis_host;
    redis.port = options.redis_port;
    redis.key_prefix = fmt::format("switchyard:kv:{}:", compatibility.Hash());
    redis.compatibility = compatibility.Digest();
    redis.num_threads = options.num_redis_threads;
    SY_ASSIGN_OR_RETURN(offloader->redis_store_, kvx::RedisBlockStore::Open(redis, pool));
    offloader->redis_ = std::make_unique<Tier>(0, kvx::kMediumRedis, block_bytes);
  }
  const int64_t num_pool_blocks = pool.num_blocks();
  const kvx::RegionHandle pool_region = offloader->transfers_.RegisterRegion(std::move(pool));
  const kvx::RegionHandle tier_region = offloader->transfers_.RegisterRegion(std::move(tier));
  // Entry i of each table is block (slot) i, so transfers are posted by id.
  SY_ASSIGN_OR_RETURN(offloader->pool_table_,
                      offloader->transfers_.PrepareBlockList(pool_region, Iota(num_pool_blocks)));
  SY_ASSIGN_OR_RETURN(offloader->tier_table_,
                      offloader->transfers_.PrepareBlockList(tier_region, Iota(host_slots)));
  return offloader;
}

KvOffloader::KvOffloader(const KvOffloadOptions& options, HostMemory memory, int64_t host_slots,
                         int64_t disk_slots, int32_t block_size, size_t block_bytes,
                         std::function<void()> wake)
    : options_(options),
      block_size_(block_size),
      block_bytes_(block_bytes),
      wake_(std::move(wake)),
      memory_(std::move(memory)),
      host_(host_slots, kvx::kMediumCpu, block_bytes,
            memory_.shared != nullptr ? &memory_.shared->index() : nullptr),
      disk_(disk_slots > 0 ? std::make_unique<Tier>(disk_slots, kvx::kMediumDisk, block_bytes)
                           : nullptr),
      transfers_(kvx::TransferEngineOptions{.num_threads = options.num_transfer_threads,
                                            .thread_name = "sy-kvtier"}) {}

KvOffloader::~KvOffloader() = default;

KvOffloader::Tier& KvOffloader::TierOf(Medium medium) {
  switch (medium) {
    case Medium::kHost:
      return host_;
    case Medium::kDisk:
      return *disk_;
    case Medium::kRedis:
      return *redis_;
  }
  SY_CHECK(false);
  return host_;
}

template <typename T, typename Self>
std::vector<T*> KvOffloader::TiersOf(Self& self) {
  std::vector<T*> tiers = {&self.host_};
  for (T* tier : {self.disk_.get(), self.redis_.get()}) {
    if (tier != nullptr)
      tiers.push_back(tier);
  }
  return tiers;
}

KvOffloader::LookupResult KvOffloader::Lookup(std::span<const BlockHash> hashes,
                                              int32_t num_cached) {
  ++generation_;
  for (const BlockHash& hash : hashes)
    lookups_.Add(KeyOf(hash));
  const auto n = static_cast<int32_t>(hashes.size());
  // Every tier is asked for the blocks past the pool's hit: its hit rate is its share.
  const int64_t query_tokens = static_cast<int64_t>(n - num_cached) * block_size_;
  for (Tier* tier : Tiers())
    tier->stats.query_tokens += query_tokens;
  return Find(hashes, num_cached);
}

KvOffloader::LookupResult KvOffloader::Find(std::span<const BlockHash> hashes,
                                            int32_t num_cached) const {
  const auto n = static_cast<int32_t>(hashes.size());
  int32_t end = num_cached;
  while (end < n) {
    const kvx::BlockTierIndex::Key key = KeyOf(hashes[static_cast<size_t>(end)]);
    if (!host_.index->IsReadable(key) && (disk_ == nullptr || !disk_->index->IsReadable(key)))
      break;
    ++end;
  }
  LookupResult result;
  result.local = end - num_cached;
  if (redis_ != nullptr)
    result.remote = n - end;
  return result;
}

bool KvOffloader::StartLoad(SeqId seq, std::span<const BlockHash> hashes,
                            std::span<const BlockId> local_blocks, int32_t num_remote) {
  SY_CHECK(hashes.size() == local_blocks.size());
  SY_CHECK(num_remote == 0 || redis_ != nullptr);
  const size_t num_local = hashes.size() - static_cast<size_t>(num_remote);
  Job host{.medium = Medium::kHost, .seq = seq};
  Job disk{.medium = Medium::kDisk, .seq = seq};
  Job redis{.medium = Medium::kRedis, .seq = seq};
  auto give_back = [&] {
    for (int64_t slot : host.slots)
      host_.index->Release(slot);
    for (int64_t slot : disk.slots)
      disk_->index->Release(slot);
  };
  for (size_t i = 0; i < hashes.size(); ++i) {
    Job* job = &redis;
    if (i < num_local) {
      const kvx::BlockTierIndex::Key key = KeyOf(hashes[i]);
      std::optional<int64_t> slot = host_.index->Acquire(key);
      job = &host;
      if (!slot.has_value() && disk_ != nullptr) {
        slot = disk_->index->Acquire(key);
        job = &disk;
      }
      if (!slot.has_value()) {
        give_back();
        return false;
      }
      job->slots.push_back(*slot);
    }
    job->blocks.push_back(local_blocks[i]);
    job->hashes.push_back(hashes[i]);
  }
  PendingLoad pending;
  pending.host_blocks = static_cast<int32_t>(host.blocks.size());
  pending.disk_blocks = static_cast<int32_t>(disk.blocks.size());
  pending.redis_blocks = num_remote;
  for (int32_t blocks : {pending.host_blocks, pending.disk_blocks, pending.redis_blocks})
    pending.parts += blocks > 0 ? 1 : 0;
  if (pending.host_blocks > 0 && !Post(std::move(host))) {
    for (int64_t slot : disk.slots)
      disk_->index->Release(slot);
    return false;
  }
  pending_loads_.emplace(seq, pending);
  // The disk and Redis stores queue without limit.
  if (pending.disk_blocks > 0)
    Post(std::move(disk));
  if (pending.redis_blocks > 0)
    Post(std::move(redis));
  return true;
}

void KvOffloader::CollectStores(std::span<const KvCacheManager::ReleasedBlock> released, Tier& tier,
                                Job& job) {
  for (const KvCacheManager::ReleasedBlock& r : released) {
    const kvx::BlockTierIndex::Key key = KeyOf(r.hash);
    if (lookups_.Count(key) < options_.store_threshold)
      continue;
    if (tier.index == nullptr) {  // Redis
      if (redis_written_.Count(key) > 0)
        continue;
    } else {
      if (tier.index->Contains(key))
        continue;
      std::optional<kvx::BlockTierIndex::Key> evicted;
      const std::optional<int64_t> slot = tier.index->BeginWrite(key, &evicted);
      if (!slot.has_value())
        break;  // every slot is busy: the rest would not fit either
      if (evicted.has_value()) {
        events_.push_back(Removed(*evicted, tier.stats.medium));
        ++tier.stats.evicted_blocks;
      }
      job.slots.push_back(*slot);
    }
    job.blocks.push_back(r.block);
    job.hashes.push_back(r.hash);
  }
}

std::vector<BlockId> KvOffloader::StartStores(
    std::span<const KvCacheManager::ReleasedBlock> released) {
  std::vector<BlockId> reading;
  if (released.empty())
    return reading;
  for (auto [medium, tier] :
       {std::pair{Medium::kHost, &host_}, std::pair{Medium::kDisk, disk_.get()},
        std::pair{Medium::kRedis, redis_.get()}}) {
    if (tier == nullptr)
      continue;
    Job job{.medium = medium, .is_store = true};
    CollectStores(released, *tier, job);
    if (job.blocks.empty())
      continue;
    const std::vector<BlockId> blocks = job.blocks;
    if (Post(std::move(job)))
      reading.insert(reading.end(), blocks.begin(), blocks.end());
  }
  return reading;
}

bool KvOffloader::Post(Job job) {
  ++generation_;
  const uint64_t id = next_job_++;
  job.posted = Clock::now();
  const Clock::time_point posted = job.posted;
  auto on_results = [this, id, posted](std::vector<absl::Status> results) {
    OnDone(id, std::move(results), posted);
  };
  if (job.medium != Medium::kHost) {
    const bool is_store = job.is_store;
    if (job.medium == Medium::kDisk) {
      std::vector<kvx::DiskBlockStore::Op> ops;
      for (size_t i = 0; i < job.blocks.size(); ++i)
        ops.push_back({job.slots[i], KeyOf(job.hashes[i]), job.blocks[i]});
      jobs_.emplace(id, std::move(job));
      Submit(*disk_store_, is_store, std::move(ops), std::move(on_results));
    } else {
      std::vector<kvx::RedisBlockStore::Op> ops;
      for (size_t i = 0; i < job.blocks.size(); ++i)
        ops.push_back({KeyOf(job.hashes[i]), job.blocks[i]});
      jobs_.emplace(id, std::move(job));
      Submit(*redis_store_, is_store, std::move(ops), std::move(on_results));
    }
    return true;  // the stores queue without limit
  }
  const std::vector<int32_t> slots(job.slots.begin(), job.slots.end());
  const size_t n = job.blocks.size();
  auto on_done = [this, id, posted, n](kvx::TransferState state, const absl::Status& status) {
    OnDone(id,
           std::vector<absl::Status>(n, state == kvx::TransferState::kDone
                                            ? absl::OkStatus()
                                            : (status.ok() ? absl::CancelledError() : status)),
           posted);
  };
  absl::StatusOr<kvx::TransferHandle> handle =
      job.is_store ? transfers_.Post(pool_table_, job.blocks, tier_table_, slots, on_done)
                   : transfers_.Post(tier_table_, slots, pool_table_, job.blocks, on_done);
  if (!handle.ok()) {
    SY_LOG_WARN("KV host tier: not {} {} blocks: {}", job.is_store ? "storing" : "loading",
                job.blocks.size(), handle.status().ToString());
    for (int64_t slot : job.slots) {
      if (job.is_store) {
        host_.index->EndWrite(slot, /*ok=*/false);
      } else {
        host_.index->Release(slot);
      }
    }
    return false;
  }
  jobs_.emplace(id, std::move(job));
  return true;
}

void KvOffloader::OnDone(uint64_t job, std::vector<absl::Status> results,
                         Clock::time_point posted) {
  const double seconds = std::chrono::duration<double>(Clock::now() - posted).count();
  {
    base::MutexLock lock(&mu_);
    done_.push_back({job, std::move(results), seconds});
  }
  wake_();
}

KvOffloader::Finished KvOffloader::TakeFinished() {
  std::vector<Done> done;
  {
    base::MutexLock lock(&mu_);
    done.swap(done_);
  }
  Finished finished;
  if (!done.empty())
    ++generation_;
  for (const Done& d : done) {
    auto it = jobs_.find(d.job);
    SY_CHECK(it != jobs_.end());
    if (it->second.is_store) {
      FinishStore(it->second, d, finished);
    } else {
      FinishLoad(it->second, d, finished);
    }
    jobs_.erase(it);
  }
  return finished;
}

void KvOffloader::FinishStore(Job& job, const Done& done, Finished& finished) {
  Tier& tier = TierOf(job.medium);
  kvx::BlockStored stored;
  for (size_t i = 0; i < job.blocks.size(); ++i) {
    const bool ok = done.results[i].ok();
    if (tier.index != nullptr)
      tier.index->EndWrite(job.slots[i], ok);
    if (ok) {
      stored.block_hashes.push_back(job.hashes[i].event_hash());
      if (job.medium == Medium::kRedis)
        redis_written_.Add(KeyOf(job.hashes[i]));
    } else if (job.medium != Medium::kHost)
      SY_LOG_WARN("KV {} tier: {}", tier.stats.medium, done.results[i].ToString());
  }
  const auto num_stored = static_cast<int64_t>(stored.block_hashes.size());
  if (num_stored > 0) {
    tier.stats.stored_blocks += num_stored;
    tier.stats.store_bytes += num_stored * static_cast<int64_t>(block_bytes_);
    tier.stats.store_seconds += done.seconds;
    if (job.medium != Medium::kRedis) {
      // As vLLM's offloading events: hashes only, no tokens or parent.
      stored.block_size = block_size_;
      stored.medium = tier.stats.medium;
      events_.emplace_back(std::move(stored));
    }
  }
  finished.unpin.insert(finished.unpin.end(), job.blocks.begin(), job.blocks.end());
}

void KvOffloader::FinishLoad(Job& job, const Done& done, Finished& finished) {
  Tier& tier = TierOf(job.medium);
  PendingLoad& pending = pending_loads_.at(job.seq);
  int32_t num_ok = 0;
  while (num_ok < static_cast<int32_t>(done.results.size()) && done.results[num_ok].ok())
    ++num_ok;
  if (job.medium == Medium::kRedis) {
    // Past the run Redis held: a miss ends it; anything else is a failure.
    pending.redis_found = num_ok;
    const bool missed = num_ok == static_cast<int32_t>(done.results.size()) ||
                        absl::IsNotFound(done.results[num_ok]);
    if (!missed) {
      SY_LOG_WARN("KV Redis tier: {}", done.results[num_ok].ToString());
      ++tier.stats.loads_failed;
    }
  } else {
    for (size_t i = 0; i < job.slots.size(); ++i) {
      const int64_t slot = job.slots[i];
      tier.index->Release(slot);
      // A disk entry that did not read back whole is dropped: it would fail again.
      if (!done.results[i].ok() && job.medium == Medium::kDisk && !tier.index->IsPinned(slot)) {
        SY_LOG_WARN("KV disk tier: {}", done.results[i].ToString());
        events_.push_back(Removed(KeyOf(job.hashes[i]), tier.stats.medium));
        tier.index->Discard(slot);
      }
    }
    pending.ok = pending.ok && num_ok == static_cast<int32_t>(job.blocks.size());
  }
  tier.stats.load_bytes += static_cast<int64_t>(num_ok) * static_cast<int64_t>(block_bytes_);
  tier.stats.load_seconds += done.seconds;
  if (--pending.parts > 0)
    return;
  const int32_t local = pending.host_blocks + pending.disk_blocks;
  finished.loads.push_back({job.seq, pending.ok ? local + pending.redis_found : 0});
  for (auto [t, blocks] :
       {std::pair{&host_, pending.host_blocks}, std::pair{disk_.get(), pending.disk_blocks},
        std::pair{redis_.get(), pending.redis_found}}) {
    if (t == nullptr || blocks == 0)
      continue;
    if (pending.ok) {
      t->stats.hit_tokens += static_cast<int64_t>(blocks) * block_size_;
      ++t->stats.loads_done;
    } else if (t != redis_.get()) {
      ++t->stats.loads_failed;
    }
  }
  pending_loads_.erase(job.seq);
}

std::vector<kvx::KvCacheEvent> KvOffloader::TakeEvents() {
  return std::exchange(events_, {});
}

std::vector<KvTierStats> KvOffloader::stats() const {
  std::vector<KvTierStats> stats;
  for (const Tier* tier : Tiers()) {
    stats.push_back(tier->stats);
    stats.back().used_blocks = tier->index != nullptr ? tier->index->num_used() : 0;
  }
  return stats;
}

}  // namespace switchyard::engine
