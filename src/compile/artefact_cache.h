// ArtefactCache: the compile cache's front door. A lookup tries, in order,
//   1. memory: an in-process LRU of entries found before (each still held, see HostEntry),
//   2. host: the directory every engine on the host shares (host_cache.h),
//   3. redis: the cross-host cache, when configured (redis_cache.h; a hit is written into
//      the host directory first, so the loader always opens a file there),
// and otherwise compiles through the caller's callback while holding the key's
// single-flight lock (other processes wait, then find the entry), storing into the host
// directory and, when configured, into Redis.
//
// An entry that may not be loaded (corrupt, truncated, unsigned, wrongly signed, stale,
// built for a CPU feature this one lacks) is a miss: counted, logged once per level, removed
// and replaced. When Redis fails (down, or slower than its timeout), level 3 turns off for
// the rest of the process with one warning and the cache goes on with levels 1 and 2.
//
// The artefact is opaque bytes: the caller names it by a CacheKey and gets back where it was
// found, how long that took, and the entry's path and metadata.
//
// Thread-safe. Compiles of different keys may run at once on different threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "compile/cache_key.h"
#include "compile/host_cache.h"
#include "compile/redis_cache.h"

namespace switchyard::compile {

struct ArtefactCacheOptions {
  HostCacheOptions host;
  // Level 3, off when unset.
  std::optional<RedisCacheOptions> redis;
  // Entries level 1 keeps (and holds against eviction).
  size_t memory_entries = 64;
};

enum class CacheLevel { kMemory, kHost, kRedis, kCompiled };
std::string_view CacheLevelName(CacheLevel level);  // "memory", "host", "redis", "compiled"

// What a compile produces.
struct CompiledArtefact {
  std::string bytes;
  // The ISA features its code needs (isa_features.h names).
  std::vector<std::string> isa_features;
};
using CompileFunction = absl::FunctionRef<absl::StatusOr<CompiledArtefact>()>;

struct ArtefactLookup {
  CacheLevel found_in = CacheLevel::kCompiled;
  std::chrono::microseconds elapsed{0};
  // Held while any lookup or level 1 keeps it: its files stay until then.
  std::shared_ptr<const HostEntry> entry;
};

// Totals since the cache was opened.
struct CacheCounters {
  int64_t memory_hits = 0;
  int64_t host_hits = 0;
  int64_t redis_hits = 0;
  int64_t misses = 0;
  int64_t compiles = 0;
  // Host or Redis entries that could not be loaded and were replaced.
  int64_t corrupt_replaced = 0;
  int64_t evictions = 0;
  int64_t redis_errors = 0;
};

class ArtefactCache {
 public:
  // Opens the host directory, and Redis when configured: a Redis that cannot be reached is
  // a warning and level 3 stays off; a configuration without a signing key is an error.
  static absl::StatusOr<std::unique_ptr<ArtefactCache>> Open(ArtefactCacheOptions options);

  // The entry of `key`, found or compiled. Errors: the compile's, or the host directory's
  // (it cannot be written), never a bad entry's.
  absl::StatusOr<ArtefactLookup> GetOrCompile(const CacheKey& key, CompileFunction compile);

  CacheCounters counters() const;
  bool redis_enabled() const;
  const HostCache& host() const { return *host_; }

 private:
  using Held = std::shared_ptr<const HostEntry>;
  ArtefactCache(ArtefactCacheOptions options, std::unique_ptr<HostCache> host,
                std::unique_ptr<RedisCache> redis);

  std::optional<Held> FindInMemory(const std::string& key);
  void Remember(const std::string& key, Held entry);
  // The host entry of `key`, or nullopt. With the key's lock held, a bad one is removed and
  // counted; without, it is left for whoever holds the lock.
  absl::StatusOr<std::optional<Held>> FindOnHost(const std::string& key, bool key_locked);
  // The Redis entry of `key` stored on the host, or nullopt.
  absl::StatusOr<std::optional<Held>> FindInRedis(const std::string& key);
  absl::StatusOr<Held> CompileAndStore(const CacheKey& key, CompileFunction compile);
  // Stores into the host directory and finds it there, held.
  absl::StatusOr<Held> StoreOnHost(const EntryMetadata& metadata, std::string_view factors_json,
                                   std::string_view artefact);
  // Turns level 3 off after a failure, with one warning.
  void RedisFailed(const absl::Status& status);
  // A bad entry at `level`: counted; the first of each level is logged.
  void BadEntry(CacheLevel level, std::string_view key, const absl::Status& why);
  void Count(int64_t CacheCounters::*counter, int64_t n = 1);

  const ArtefactCacheOptions options_;
  const std::unique_ptr<HostCache> host_;

  mutable base::Mutex mu_;
  // Null once turned off.
  std::shared_ptr<RedisCache> redis_ ABSL_GUARDED_BY(mu_);
  // Most recently used first.
  std::list<std::pair<std::string, Held>> memory_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<std::pair<std::string, Held>>::iterator> memory_index_
      ABSL_GUARDED_BY(mu_);
  CacheCounters counters_ ABSL_GUARDED_BY(mu_);
  bool logged_bad_host_entry_ ABSL_GUARDED_BY(mu_) = false;
  bool logged_bad_redis_entry_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_redis_off_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::compile
