// RedisBlockStore: a remote KV tier on Redis, shared by every engine that points at the
// same server and serves the same model. A block is one self-checking KvBlockEntry
// (kv_block_entry.h) stored under `<key_prefix><hex of its chained hash>`; the prefix names
// the KV compatibility (model fingerprint, dtype, shape, layout), and the chained hash
// already carries the tokens before the block, the LoRA and the cache_salt, so tenants and
// models never share a key. Redis's own eviction (maxmemory with an LRU policy) bounds it.
//
// Copies go between Redis and the pool's block segments on the store's threads, pipelined
// (one round trip per batch): Write and Read queue a batch and return; `done` runs on a
// store thread with one status per op. Connections are made on demand and dropped after
// an error, so a Redis that went away and came back is used again (a batch whose pooled
// connection turns out closed is retried once on a new one); while it is away every op is
// Unavailable (after at most `timeout`), which callers treat as a miss. The
// destructor finishes what is queued (every callback runs), then joins.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "base/thread_pool.h"
#include "kvx/kv_block_entry.h"
#include "kvx/memory_region.h"
#include "kvx/redis_connection.h"

namespace switchyard::kvx {

struct RedisBlockStoreOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Put before every key, e.g. "switchyard:kv:<KvCompatibility::Hash()>:".
  std::string key_prefix{};
  // Written into every entry and checked on every read (KvCompatibility::Digest).
  std::array<uint8_t, 32> compatibility{};
  int num_threads = 2;
  // For connecting and for each reply.
  std::chrono::milliseconds timeout{1000};
};

class RedisBlockStore {
 public:
  struct Op {
    KvBlockKey key{};
    int32_t block = 0;
  };
  using Callback = absl::AnyInvocable<void(std::vector<absl::Status> results)>;

  // Checks that the server answers (PING). `pool` is the memory blocks are copied from and
  // to; it must outlive the store. Unavailable when Redis cannot be reached.
  static absl::StatusOr<std::unique_ptr<RedisBlockStore>> Open(RedisBlockStoreOptions options,
                                                               MemoryRegion pool);
  ~RedisBlockStore();
  RedisBlockStore(const RedisBlockStore&) = delete;
  RedisBlockStore& operator=(const RedisBlockStore&) = delete;

  // Stores each op's pool block under its key. Results: OK, or Unavailable / Internal.
  // REQUIRES: every block is inside the pool.
  void Write(std::vector<Op> ops, Callback done);
  // Reads the leading run of ops whose entries Redis holds into their pool blocks. Results:
  // OK for each block of the run; at the first miss NotFound, for a bad entry DataLoss, for
  // a lost server Unavailable, and every later op gets the same (it is not read). A failed
  // op may have written part of its pool block: the caller must not publish it.
  // REQUIRES: every block is inside the pool.
  void Read(std::vector<Op> ops, Callback done);

  std::string KeyName(const KvBlockKey& key) const;

 private:
  RedisBlockStore(RedisBlockStoreOptions options, MemoryRegion pool);

  // How a batch lost its connection, if it did.
  struct Loss {
    bool lost = false;
    bool before_any_reply = false;
  };
  using Batch =
      std::function<std::vector<absl::Status>(RedisConnection&, const std::vector<Op>&, Loss*)>;

  // A connected context from the idle list (`pooled`), or a new one.
  absl::StatusOr<RedisConnection> Acquire(bool* pooled);
  void Return(RedisConnection connection);
  // Runs `batch` on a connection, which goes back to the idle list unless it was lost; a
  // pooled connection lost before any reply is retried once on a new one.
  std::vector<absl::Status> RunBatch(const std::vector<Op>& ops, const Batch& batch);
  // One pipelined batch of SETs / GETs on `c`.
  std::vector<absl::Status> WriteOn(RedisConnection& c, const std::vector<Op>& ops, Loss* loss);
  std::vector<absl::Status> ReadOn(RedisConnection& c, const std::vector<Op>& ops, Loss* loss);

  const RedisBlockStoreOptions options_;
  const MemoryRegion pool_;
  base::Mutex mu_;
  std::vector<RedisConnection> idle_ ABSL_GUARDED_BY(mu_);
  // Reset first in the destructor, while the members above are alive.
  std::unique_ptr<base::ThreadPool> threads_;
};

}  // namespace switchyard::kvx
