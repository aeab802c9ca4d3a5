#include "compile/artefact_cache.h"

#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"

namespace switchyard::compile {

std::string_view CacheLevelName(CacheLevel level) {
  switch (level) {
    case CacheLevel::kMemory:
      return "memory";
    case CacheLevel::kHost:
      return "host";
    case CacheLevel::kRedis:
      return "redis";
    case CacheLevel::kCompiled:
      return "compiled";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<ArtefactCache>> ArtefactCache::Open(ArtefactCacheOptions options) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<HostCache> host, HostCache::Open(options.host));
  std::unique_ptr<RedisCache> redis;
  absl::Status redis_failure;
  if (options.redis.has_value()) {
    options.redis->requirements = options.host.requirements;
    absl::StatusOr<std::unique_ptr<RedisCache>> opened = RedisCache::Open(*options.redis);
    if (absl::IsInvalidArgument(opened.status()))
      return opened.status();
    if (opened.ok())
      redis = *std::move(opened);
    else
      redis_failure = opened.status();
  }
  std::unique_ptr<ArtefactCache> cache(
      new ArtefactCache(std::move(options), std::move(host), std::move(redis)));
  if (!redis_failure.ok())
    cache->RedisFailed(redis_failure);
  return cache;
}

ArtefactCache::ArtefactCache(ArtefactCacheOptions options, std::unique_ptr<HostCache> host,
                             std::unique_ptr<RedisCache> redis)
    : options_(std::move(options)), host_(std::move(host)), redis_(std::move(redis)) {}

absl::StatusOr<ArtefactLookup> ArtefactCache::GetOrCompile(const CacheKey& key,
                                                           CompileFunction compile) {
  const auto start = std::chrono::steady_clock::now();
  auto found = [&](CacheLevel level, Held entry) {
    if (level != CacheLevel::kMemory)
      Remember(key.hex, entry);
    return ArtefactLookup{.found_in = level,
                          .elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - start),
                          .entry = std::move(entry)};
  };
  if (std::optional<Held> held = FindInMemory(key.hex)) {
    (*held)->MarkUsed();
    Count(&CacheCounters::memory_hits);
    return found(CacheLevel::kMemory, *std::move(held));
  }
  SY_ASSIGN_OR_RETURN(std::optional<Held> on_host, FindOnHost(key.hex, /*key_locked=*/false));
  if (!on_host) {
    // Single flight: whoever holds the key compiles; we find its entry once it is done.
    SY_ASSIGN_OR_RETURN(internal::FileLock key_lock, host_->LockKey(key.hex));
    SY_ASSIGN_OR_RETURN(on_host, FindOnHost(key.hex, /*key_locked=*/true));
    if (!on_host) {
      SY_ASSIGN_OR_RETURN(std::optional<Held> from_redis, FindInRedis(key.hex));
      if (from_redis) {
        Count(&CacheCounters::redis_hits);
        return found(CacheLevel::kRedis, *std::move(from_redis));
      }
      Count(&CacheCounters::misses);
      SY_ASSIGN_OR_RETURN(Held compiled, CompileAndStore(key, compile));
      return found(CacheLevel::kCompiled, std::move(compiled));
    }
  }
  Count(&CacheCounters::host_hits);
  return found(CacheLevel::kHost, *std::move(on_host));
}

std::optional<ArtefactCache::Held> ArtefactCache::FindInMemory(const std::string& key) {
  base::MutexLock lock(&mu_);
  auto it = memory_index_.find(key);
  if (it == memory_index_.end())
    return std::nullopt;
  if (!it->second->second->StillInPlace()) {
    // Found bad and replaced by another process since.
    memory_.erase(it->second);
    memory_index_.erase(it);
    return std::nullopt;
  }
  memory_.splice(memory_.begin(), memory_, it->second);
  return it->second->second;
}

void ArtefactCache::Remember(const std::string& key, Held entry) {
  Held dropped;  // released outside the lock
  base::MutexLock lock(&mu_);
  if (auto it = memory_index_.find(key); it != memory_index_.end()) {
    dropped = std::move(it->second->second);
    it->second->second = std::move(entry);
    memory_.splice(memory_.begin(), memory_, it->second);
    return;
  }
  memory_.emplace_front(key, std::move(entry));
  memory_index_[key] = memory_.begin();
  if (memory_.size() > options_.memory_entries) {
    dropped = std::move(memory_.back().second);
    memory_index_.erase(memory_.back().first);
    memory_.pop_back();
  }
}

absl::StatusOr<std::optional<ArtefactCache::Held>> ArtefactCache::FindOnHost(const std::string& key,
                                                                             bool key_locked) {
  absl::StatusOr<std::unique_ptr<HostEntry>> entry = host_->Find(key);
  if (entry.ok())
    return Held(*std::move(entry));
  if (absl::IsNotFound(entry.status()) || (absl::IsDataLoss(entry.status()) && !key_locked))
    return std::nullopt;
  if (!absl::IsDataLoss(entry.status()))
    return entry.status();
  BadEntry(CacheLevel::kHost, key, entry.status());
  SY_RETURN_IF_ERROR(host_->Remove(key, HostCache::IfHeld::kRemove));
  Count(&CacheCounters::corrupt_replaced);
  return std::nullopt;
}

absl::StatusOr<std::optional<ArtefactCache::Held>> ArtefactCache::FindInRedis(
    const std::string& key) {
  std::shared_ptr<RedisCache> redis;
  {
    base::MutexLock lock(&mu_);
    redis = redis_;
  }
  if (redis == nullptr)
    return std::nullopt;
  absl::StatusOr<RedisEntry> entry = redis->Get(key);
  if (entry.ok()) {
    SY_ASSIGN_OR_RETURN(Held held,
                        StoreOnHost(entry->metadata, entry->factors_json, entry->artefact));
    return held;
  }
  if (absl::IsDataLoss(entry.status())) {
    BadEntry(CacheLevel::kRedis, key, entry.status());
    Count(&CacheCounters::corrupt_replaced);
    // The compile that follows writes its replacement over it.
  } else if (!absl::IsNotFound(entry.status())) {
    RedisFailed(entry.status());
  }
  return std::nullopt;
}

absl::StatusOr<ArtefactCache::Held> ArtefactCache::CompileAndStore(const CacheKey& key,
                                                                   CompileFunction compile) {
  Count(&CacheCounters::compiles);
  SY_ASSIGN_OR_RETURN(CompiledArtefact artefact, compile());
  const EntryMetadata metadata =
      MakeEntryMetadata(key.hex, artefact.bytes, std::move(artefact.isa_features),
                        options_.host.requirements.project_version);
  const std::string factors_json = key.FactorsJson() + "\n";
  SY_ASSIGN_OR_RETURN(Held held, StoreOnHost(metadata, factors_json, artefact.bytes));
  std::shared_ptr<RedisCache> redis;
  {
    base::MutexLock lock(&mu_);
    redis = redis_;
  }
  if (redis != nullptr) {
    if (const absl::Status put = redis->Put(metadata, factors_json, artefact.bytes); !put.ok())
      RedisFailed(put);
  }
  return held;
}

absl::StatusOr<ArtefactCache::Held> ArtefactCache::StoreOnHost(const EntryMetadata& metadata,
                                                               std::string_view factors_json,
                                                               std::string_view artefact) {
  SY_ASSIGN_OR_RETURN(EvictionResult evicted, host_->Store(metadata, factors_json, artefact));
  Count(&CacheCounters::evictions, evicted.removed_entries);
  absl::StatusOr<std::unique_ptr<HostEntry>> entry = host_->Find(metadata.key);
  if (!entry.ok()) {
    return absl::InternalError(
        fmt::format("compile cache entry {} was stored but cannot be "
                    "found: {}",
                    metadata.key, std::string(entry.status().message())));
  }
  return Held(*std::move(entry));
}

void ArtefactCache::RedisFailed(const absl::Status& status) {
  base::MutexLock lock(&mu_);
  ++counters_.redis_errors;
  redis_.reset();
  if (std::exchange(warned_redis_off_, true))
    return;
  SY_LOG_WARN("compile cache: the Redis level is off, going on with memory and host levels: {}",
              std::string(status.message()));
}

void ArtefactCache::BadEntry(CacheLevel level, std::string_view key, const absl::Status& why) {
  bool first = false;
  {
    base::MutexLock lock(&mu_);
    bool& logged = level == CacheLevel::kRedis ? logged_bad_redis_entry_ : logged_bad_host_entry_;
    first = !logged;
    logged = true;
  }
  if (first) {
    SY_LOG_WARN("compile cache: {} entry {} cannot be loaded, replacing it: {}",
                CacheLevelName(level), key, std::string(why.message()));
  } else {
    SY_LOG_DEBUG("compile cache: {} entry {} cannot be loaded, replacing it: {}",
                 CacheLevelName(level), key, std::string(why.message()));
  }
}

void ArtefactCache::Count(int64_t CacheCounters::*counter, int64_t n) {
  base::MutexLock lock(&mu_);
  counters_.*counter += n;
}

CacheCounters ArtefactCache::counters() const {
  base::MutexLock lock(&mu_);
  return counters_;
}

bool ArtefactCache::redis_enabled() const {
  base::MutexLock lock(&mu_);
  return redis_ != nullptr;
}

}  // namespace switchyard::compile
