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

kvx::KvCacheEvent Removed(const kvx::BlockTierIndex::Key& key, const char* medium) {
  kvx::BlockRemoved removed;
  removed.block_hashes.push_back(kvx::EventHash::FromBytes(key));
  removed.medium = medium;
  return removed;
}

}  // namespace

KvOffloader::Tier::Tier(int64_t num_slots, const char* medium, size_t block_bytes)
    : index(num_slots) {
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
  SY_ASSIGN_OR_RETURN(kvx::SharedMemoryRegion memory,
                      kvx::SharedMemoryRegion::Create(static_cast<size_t>(host_slots) * block_bytes,
                                                      "switchyard-kv-host-tier"));
  SY_ASSIGN_OR_RETURN(kvx::MemoryRegion tier,
                      kvx::MemoryRegion::ForInterleaved(pool.layout(), memory.bytes(), host_slots));
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

KvOffloader::KvOffloader(const KvOffloadOptions& options, kvx::SharedMemoryRegion memory,
                         int64_t host_slots, int64_t disk_slots, int32_t block_size,
                         size_t block_bytes, std::function<void()> wake)
    : options_(options),
      block_size_(block_size),
      block_bytes_(block_bytes),
      wake_(std::move(wake)),
      memory_(std::move(memory)),
      host_(host_slots, kvx::kMediumCpu, block_bytes),
      disk_(disk_slots > 0 ? std::make_unique<Tier>(disk_slots, kvx::kMediumDisk, block_bytes)
                           : nullptr),
      transfers_(kvx::TransferEngineOptions{.num_threads = options.num_transfer_threads,
                                            .thread_name = "sy-kvtier"}) {}

KvOffloader::~KvOffloader() = default;

int32_t KvOffloader::Lookup(std::span<const BlockHash> hashes, int32_t num_cached) {
  for (const BlockHash& hash : hashes)
    lookups_.Add(KeyOf(hash));
  const auto n = static_cast<int32_t>(hashes.size());
  int32_t end = num_cached;
  for (; end < n; ++end) {
    const kvx::BlockTierIndex::Key key = KeyOf(hashes[static_cast<size_t>(end)]);
    host_.stats.query_tokens += block_size_;
    if (host_.index.IsReadable(key))
      continue;
    if (disk_ == nullptr)
      break;
    disk_->stats.query_tokens += block_size_;
    if (!disk_->index.IsReadable(key))
      break;
  }
  return end - num_cached;
}

bool KvOffloader::StartLoad(SeqId seq, std::span<const BlockHash> hashes,
                            std::span<const BlockId> local_blocks) {
  SY_CHECK(hashes.size() == local_blocks.size());
  Job host{.to_disk = false, .seq = seq};
  Job disk{.to_disk = true, .seq = seq};
  auto give_back = [&] {
    for (int64_t slot : host.slots)
      host_.index.Release(slot);
    for (int64_t slot : disk.slots)
      disk_->index.Release(slot);
  };
  for (size_t i = 0; i < hashes.size(); ++i) {
    const kvx::BlockTierIndex::Key key = KeyOf(hashes[i]);
    std::optional<int64_t> slot = host_.index.Acquire(key);
    Job* job = &host;
    if (!slot.has_value() && disk_ != nullptr) {
      slot = disk_->index.Acquire(key);
      job = &disk;
    }
    if (!slot.has_value()) {
      give_back();
      return false;
    }
    job->slots.push_back(*slot);
    job->blocks.push_back(local_blocks[i]);
    job->hashes.push_back(hashes[i]);
  }
  PendingLoad pending;
  pending.host_blocks = static_cast<int32_t>(host.blocks.size());
  pending.disk_blocks = static_cast<int32_t>(disk.blocks.size());
  pending.parts = (pending.host_blocks > 0 ? 1 : 0) + (pending.disk_blocks > 0 ? 1 : 0);
  if (pending.host_blocks > 0) {
    if (!Post(std::move(host))) {
      for (int64_t slot : disk.slots)
        disk_->index.Release(slot);
      return false;
    }
  }
  pending_loads_.emplace(seq, pending);
  if (pending.disk_blocks > 0)
    Post(std::move(disk));  // the disk store queues without limit
  return true;
}

void KvOffloader::CollectStores(std::span<const KvCacheManager::ReleasedBlock> released, Tier& tier,
                                Job& job) {
  for (const KvCacheManager::ReleasedBlock& r : released) {
    const kvx::BlockTierIndex::Key key = KeyOf(r.hash);
    if (lookups_.Count(key) < options_.store_threshold || tier.index.Contains(key))
      continue;
    std::optional<kvx::BlockTierIndex::Key> evicted;
    const std::optional<int64_t> slot = tier.index.BeginWrite(key, &evicted);
    if (!slot.has_value())
      break;  // every slot is busy: the rest would not fit either
    if (evicted.has_value()) {
      events_.push_back(Removed(*evicted, tier.stats.medium));
      ++tier.stats.evicted_blocks;
    }
    job.blocks.push_back(r.block);
    job.slots.push_back(*slot);
    job.hashes.push_back(r.hash);
  }
}

std::vector<BlockId> KvOffloader::StartStores(
    std::span<const KvCacheManager::ReleasedBlock> released) {
  std::vector<BlockId> reading;
  for (Tier* tier : {&host_, disk_.get()}) {
    if (tier == nullptr)
      continue;
    Job job{.to_disk = tier != &host_, .is_store = true};
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
  const uint64_t id = next_job_++;
  job.posted = Clock::now();
  const Clock::time_point posted = job.posted;
  if (job.to_disk) {
    std::vector<kvx::DiskBlockStore::Op> ops;
    for (size_t i = 0; i < job.blocks.size(); ++i)
      ops.push_back({job.slots[i], KeyOf(job.hashes[i]), job.blocks[i]});
    auto on_done = [this, id, posted](std::vector<absl::Status> results) {
      std::vector<bool> ok;
      for (const absl::Status& status : results) {
        if (!status.ok())
          SY_LOG_WARN("KV disk tier: {}", status.ToString());
        ok.push_back(status.ok());
      }
      OnDone(id, std::move(ok), posted);
    };
    const bool is_store = job.is_store;
    jobs_.emplace(id, std::move(job));
    if (is_store) {
      disk_store_->Write(std::move(ops), std::move(on_done));
    } else {
      disk_store_->Read(std::move(ops), std::move(on_done));
    }
    return true;
  }
  const std::vector<int32_t> slots(job.slots.begin(), job.slots.end());
  const size_t n = job.blocks.size();
  auto on_done = [this, id, posted, n](kvx::TransferState state, const absl::Status&) {
    OnDone(id, std::vector<bool>(n, state == kvx::TransferState::kDone), posted);
  };
  absl::StatusOr<kvx::TransferHandle> handle =
      job.is_store ? transfers_.Post(pool_table_, job.blocks, tier_table_, slots, on_done)
                   : transfers_.Post(tier_table_, slots, pool_table_, job.blocks, on_done);
  if (!handle.ok()) {
    SY_LOG_WARN("KV host tier: not {} {} blocks: {}", job.is_store ? "storing" : "loading",
                job.blocks.size(), handle.status().ToString());
    for (int64_t slot : job.slots) {
      if (job.is_store) {
        host_.index.EndWrite(slot, /*ok=*/false);
      } else {
        host_.index.Release(slot);
      }
    }
    return false;
  }
  jobs_.emplace(id, std::move(job));
  return true;
}

void KvOffloader::OnDone(uint64_t job, std::vector<bool> ok, Clock::time_point posted) {
  const double seconds = std::chrono::duration<double>(Clock::now() - posted).count();
  {
    base::MutexLock lock(&mu_);
    done_.push_back({job, std::move(ok), seconds});
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
  for (const Done& d : done) {
    auto it = jobs_.find(d.job);
    SY_CHECK(it != jobs_.end());
    Finish(it->second, d, finished);
    jobs_.erase(it);
  }
  return finished;
}

void KvOffloader::Finish(Job& job, const Done& done, Finished& finished) {
  Tier& tier = TierOf(job);
  const bool all_ok = std::find(done.ok.begin(), done.ok.end(), false) == done.ok.end();
  if (job.is_store) {
    kvx::BlockStored stored;
    for (size_t i = 0; i < job.slots.size(); ++i) {
      tier.index.EndWrite(job.slots[i], done.ok[i]);
      if (done.ok[i])
        stored.block_hashes.push_back(job.hashes[i].event_hash());
    }
    const auto num_stored = static_cast<int64_t>(stored.block_hashes.size());
    if (num_stored > 0) {
      // As vLLM's offloading events: hashes only, no tokens or parent.
      stored.block_size = block_size_;
      stored.medium = tier.stats.medium;
      events_.emplace_back(std::move(stored));
      tier.stats.stored_blocks += num_stored;
      tier.stats.store_bytes += num_stored * static_cast<int64_t>(block_bytes_);
      tier.stats.store_seconds += done.seconds;
    }
    finished.unpin.insert(finished.unpin.end(), job.blocks.begin(), job.blocks.end());
    return;
  }
  for (size_t i = 0; i < job.slots.size(); ++i) {
    const int64_t slot = job.slots[i];
    tier.index.Release(slot);
    // A disk entry that did not read back whole is dropped: it would fail again.
    if (!done.ok[i] && job.to_disk && !tier.index.IsPinned(slot)) {
      events_.push_back(Removed(KeyOf(job.hashes[i]), tier.stats.medium));
      tier.index.Discard(slot);
    }
  }
  tier.stats.load_bytes += static_cast<int64_t>(job.blocks.size() * block_bytes_);
  tier.stats.load_seconds += done.seconds;
  PendingLoad& pending = pending_loads_.at(job.seq);
  pending.ok = pending.ok && all_ok;
  if (--pending.parts > 0)
    return;
  const int32_t n = pending.host_blocks + pending.disk_blocks;
  finished.loads.push_back({job.seq, pending.ok ? n : 0});
  for (Tier* t : {&host_, disk_.get()}) {
    const int32_t blocks = t == &host_ ? pending.host_blocks : pending.disk_blocks;
    if (t == nullptr || blocks == 0)
      continue;
    if (pending.ok) {
      t->stats.hit_tokens += static_cast<int64_t>(blocks) * block_size_;
      ++t->stats.loads_done;
    } else {
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
  for (const Tier* tier :
       {static_cast<const Tier*>(&host_), static_cast<const Tier*>(disk_.get())}) {
    if (tier == nullptr)
      continue;
    stats.push_back(tier->stats);
    stats.back().used_blocks = tier->index.num_used();
  }
  return stats;
}

}  // namespace switchyard::engine
