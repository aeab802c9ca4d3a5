#include "engine/kv_offloader.h"

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

std::vector<int32_t> ToIndices(std::span<const int64_t> slots) {
  return {slots.begin(), slots.end()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvOffloader>> KvOffloader::Start(const KvOffloadOptions& options,
                                                                kvx::MemoryRegion pool,
                                                                int32_t block_size,
                                                                std::function<void()> wake) {
  SY_CHECK(options.store_threshold >= 1);
  const size_t block_bytes = pool.layout().block_bytes();
  const int64_t num_slots =
      std::min<int64_t>(options.capacity_bytes / static_cast<int64_t>(block_bytes),
                        std::numeric_limits<int32_t>::max());
  if (num_slots < 1) {
    return absl::InvalidArgumentError(
        fmt::format("--kv-offloading-size: {} bytes hold no KV block ({} bytes each)",
                    options.capacity_bytes, block_bytes));
  }
  SY_ASSIGN_OR_RETURN(kvx::SharedMemoryRegion memory,
                      kvx::SharedMemoryRegion::Create(static_cast<size_t>(num_slots) * block_bytes,
                                                      "switchyard-kv-host-tier"));
  SY_ASSIGN_OR_RETURN(kvx::MemoryRegion tier,
                      kvx::MemoryRegion::ForInterleaved(pool.layout(), memory.bytes(), num_slots));
  std::unique_ptr<KvOffloader> offloader(new KvOffloader(options, std::move(memory), num_slots,
                                                         block_size, block_bytes, std::move(wake)));
  const int64_t num_pool_blocks = pool.num_blocks();
  const kvx::RegionHandle pool_region = offloader->transfers_.RegisterRegion(std::move(pool));
  const kvx::RegionHandle tier_region = offloader->transfers_.RegisterRegion(std::move(tier));
  // Entry i of each table is block (slot) i, so transfers are posted by id.
  SY_ASSIGN_OR_RETURN(offloader->pool_table_,
                      offloader->transfers_.PrepareBlockList(pool_region, Iota(num_pool_blocks)));
  SY_ASSIGN_OR_RETURN(offloader->tier_table_,
                      offloader->transfers_.PrepareBlockList(tier_region, Iota(num_slots)));
  return offloader;
}

KvOffloader::KvOffloader(const KvOffloadOptions& options, kvx::SharedMemoryRegion memory,
                         int64_t num_slots, int32_t block_size, size_t block_bytes,
                         std::function<void()> wake)
    : options_(options),
      block_size_(block_size),
      block_bytes_(block_bytes),
      wake_(std::move(wake)),
      memory_(std::move(memory)),
      index_(num_slots),
      transfers_(kvx::TransferEngineOptions{.num_threads = options.num_transfer_threads,
                                            .thread_name = "sy-kvtier"}) {
  stats_.capacity_blocks = num_slots;
  stats_.block_bytes = static_cast<int64_t>(block_bytes);
}

KvOffloader::~KvOffloader() = default;

int32_t KvOffloader::Lookup(std::span<const BlockHash> hashes, int32_t num_cached) {
  for (const BlockHash& hash : hashes)
    lookups_.Add(KeyOf(hash));
  const auto n = static_cast<int32_t>(hashes.size());
  int32_t end = num_cached;
  while (end < n && index_.IsReadable(KeyOf(hashes[static_cast<size_t>(end)])))
    ++end;
  stats_.query_tokens += static_cast<int64_t>(n - num_cached) * block_size_;
  return end - num_cached;
}

bool KvOffloader::StartLoad(SeqId seq, std::span<const BlockHash> hashes,
                            std::span<const BlockId> local_blocks) {
  SY_CHECK(hashes.size() == local_blocks.size());
  Job job;
  job.seq = seq;
  job.blocks.assign(local_blocks.begin(), local_blocks.end());
  for (const BlockHash& hash : hashes) {
    const std::optional<int64_t> slot = index_.Acquire(KeyOf(hash));
    if (!slot.has_value()) {
      for (int64_t s : job.slots)
        index_.Release(s);
      return false;
    }
    job.slots.push_back(*slot);
  }
  return Post(std::move(job));
}

std::vector<BlockId> KvOffloader::StartStores(
    std::span<const KvCacheManager::ReleasedBlock> released) {
  Job job;
  job.is_store = true;
  for (const KvCacheManager::ReleasedBlock& r : released) {
    const kvx::BlockTierIndex::Key key = KeyOf(r.hash);
    if (lookups_.Count(key) < options_.store_threshold || index_.Contains(key))
      continue;
    std::optional<kvx::BlockTierIndex::Key> evicted;
    const std::optional<int64_t> slot = index_.BeginWrite(key, &evicted);
    if (!slot.has_value())
      break;  // every slot is busy: the rest would not fit either
    if (evicted.has_value()) {
      kvx::BlockRemoved removed;
      removed.block_hashes.push_back(kvx::EventHash::FromBytes(*evicted));
      removed.medium = kvx::kMediumCpu;
      events_.emplace_back(std::move(removed));
      ++stats_.evicted_blocks;
    }
    job.blocks.push_back(r.block);
    job.slots.push_back(*slot);
    job.hashes.push_back(r.hash);
  }
  if (job.blocks.empty())
    return {};
  std::vector<BlockId> reading = job.blocks;
  if (!Post(std::move(job)))
    return {};
  return reading;
}

bool KvOffloader::Post(Job job) {
  const uint64_t id = next_job_++;
  job.posted = Clock::now();
  const std::vector<int32_t> slots = ToIndices(job.slots);
  const Clock::time_point posted = job.posted;
  auto on_done = [this, id, posted](kvx::TransferState state, const absl::Status&) {
    OnDone(id, state, posted);
  };
  absl::StatusOr<kvx::TransferHandle> handle =
      job.is_store ? transfers_.Post(pool_table_, job.blocks, tier_table_, slots, on_done)
                   : transfers_.Post(tier_table_, slots, pool_table_, job.blocks, on_done);
  if (!handle.ok()) {
    SY_LOG_WARN("KV host tier: not {} {} blocks: {}", job.is_store ? "storing" : "loading",
                job.blocks.size(), handle.status().ToString());
    for (int64_t slot : job.slots) {
      if (job.is_store) {
        index_.EndWrite(slot, /*ok=*/false);
      } else {
        index_.Release(slot);
      }
    }
    return false;
  }
  jobs_.emplace(id, std::move(job));
  return true;
}

void KvOffloader::OnDone(uint64_t job, kvx::TransferState state, Clock::time_point posted) {
  const double seconds = std::chrono::duration<double>(Clock::now() - posted).count();
  {
    base::MutexLock lock(&mu_);
    done_.push_back({job, state == kvx::TransferState::kDone, seconds});
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
    Job& job = it->second;
    const auto bytes = static_cast<int64_t>(job.blocks.size() * block_bytes_);
    if (job.is_store) {
      kvx::BlockStored stored;
      for (size_t i = 0; i < job.slots.size(); ++i) {
        index_.EndWrite(job.slots[i], d.ok);
        if (d.ok)
          stored.block_hashes.push_back(job.hashes[i].event_hash());
      }
      if (d.ok) {
        // As vLLM's offloading events: hashes only, no tokens or parent.
        stored.block_size = block_size_;
        stored.medium = kvx::kMediumCpu;
        events_.emplace_back(std::move(stored));
        stats_.stored_blocks += static_cast<int64_t>(job.blocks.size());
        stats_.store_bytes += bytes;
        stats_.store_seconds += d.seconds;
      }
      finished.unpin.insert(finished.unpin.end(), job.blocks.begin(), job.blocks.end());
    } else {
      for (int64_t slot : job.slots)
        index_.Release(slot);
      const auto n = static_cast<int32_t>(job.blocks.size());
      finished.loads.push_back({job.seq, d.ok ? n : 0});
      if (d.ok) {
        stats_.hit_tokens += static_cast<int64_t>(n) * block_size_;
        stats_.load_bytes += bytes;
        stats_.load_seconds += d.seconds;
        ++stats_.loads_done;
      } else {
        ++stats_.loads_failed;
      }
    }
    jobs_.erase(it);
  }
  return finished;
}

std::vector<kvx::KvCacheEvent> KvOffloader::TakeEvents() {
  return std::exchange(events_, {});
}

KvTierStats KvOffloader::stats() const {
  KvTierStats stats = stats_;
  stats.used_blocks = index_.num_used();
  return stats;
}

}  // namespace switchyard::engine
