// RedisCache: level 3 of the compile cache, shared across hosts through a Redis server
// (Debian's redis-server), off unless configured. One value per entry, under
// `<key_prefix><key hex>`, signed with the operator's key (redis_entry.h); there is no level 3
// without a signing key, since whoever can write a cache that others load runs code on their
// hosts. Redis's own eviction (maxmemory with an LRU policy) bounds it.
//
// Every call is bounded by `timeout` (connecting and each reply): a server that is down or
// hangs is Unavailable after at most that long, never a hang. A failed connection is dropped
// and made again by the next call.
//
// Thread-safe: calls are serialized on one connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "compile/redis_entry.h"
#include "kvx/redis_connection.h"

namespace switchyard::compile {

struct RedisCacheOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // The file holding the signing key (its bytes, trailing whitespace dropped; at least 16).
  std::string key_file;
  std::string key_prefix = "switchyard:compile:";
  std::chrono::milliseconds timeout{500};
  EntryRequirements requirements;
};

// The signing key in `path`; InvalidArgument when it is missing, unreadable or too short.
absl::StatusOr<std::string> ReadSigningKey(const std::string& path);

// "host:port" as in --redis; InvalidArgument otherwise.
absl::Status ParseRedisAddress(std::string_view address, RedisCacheOptions* options);

// A value as a listing sees it.
struct RedisEntryInfo {
  std::string key;
  uint64_t bytes = 0;
  // Seconds since a command last touched it (Redis's OBJECT IDLETIME).
  int64_t idle_s = 0;
};

class RedisCache {
 public:
  // Reads the signing key (InvalidArgument without one), connects and checks that the
  // server answers (Unavailable when not).
  static absl::StatusOr<std::unique_ptr<RedisCache>> Open(RedisCacheOptions options);

  const RedisCacheOptions& options() const { return options_; }

  // The checked entry of `key`: NotFound without a value, DataLoss for a value that is not a
  // loadable entry of it, Unavailable when Redis failed.
  absl::StatusOr<RedisEntry> Get(std::string_view key);
  // Stores a signed entry. REQUIRES: metadata was made for `artefact`.
  absl::Status Put(const EntryMetadata& metadata, std::string_view factors_json,
                   std::string_view artefact);
  // Deletes `key`'s value (OK when there was none).
  absl::Status Remove(std::string_view key);
  // Every value under the prefix whose name ends in a key.
  absl::StatusOr<std::vector<RedisEntryInfo>> List();

 private:
  RedisCache(RedisCacheOptions options, std::string signing_key)
      : options_(std::move(options)), signing_key_(std::move(signing_key)) {}

  std::string ValueName(std::string_view key) const;
  // Runs `argv` on the connection (made first when there is none); a lost connection is
  // dropped and is Unavailable, as is a Redis error reply.
  absl::StatusOr<kvx::RedisReply> Command(std::span<const std::string_view> argv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisCacheOptions options_;
  const std::string signing_key_;
  base::Mutex mu_;
  std::optional<kvx::RedisConnection> connection_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::compile
