// KvEventIndexer: the precise prefix index's writer. It applies one engine's KV events to a
// PrefixIndex: BlockStored blocks are keyed from their token ids (block_keys.h), chained to
// the parent block's key, so the router's keys never depend on the engine's hash function
// or seed. Events of a KV tier (medium "CPU" or "DISK") carry engine hashes without tokens:
// their keys are the ones the pool's events gave those hashes, and a hash never seen in the
// pool is skipped. BlockRemoved drops the named hashes' keys from its medium's tier; an
// engine hash is forgotten once no tier holds it. Other media (a shared "REDIS" tier that
// every engine reads alike) are not indexed. AllBlocksCleared drops the endpoint's whole
// entry. Events for blocks whose parent is unknown (the router joined late and the replay
// did not reach back far enough) are skipped: without the parent's key their prefix cannot
// be named.
//
// Threads: Apply may be called from several subscriber threads (one per engine); the
// engine-hash maps are per endpoint under one mutex, the index is itself thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"
#include "kvx/kv_events.h"
#include "router/prefix/prefix_index.h"

namespace switchyard::router {

class KvEventIndexer {
 public:
  // `seed` keys block 0 (PrefixSeed of the served model); borrows `index`.
  KvEventIndexer(PrefixIndex* index, uint64_t seed) : index_(index), seed_(seed) {}

  void Apply(const std::string& endpoint, const kvx::KvEventBatch& batch);
  // Forgets the endpoint (it went away or restarted).
  void RemoveEndpoint(const std::string& endpoint);

  // Events skipped because their parent was unknown or their shape was wrong.
  int64_t num_skipped() const;

 private:
  // A block the engine named: its router key and the tiers holding it (bit t: KvTier t).
  struct Known {
    uint64_t key = 0;
    uint8_t tiers = 0;
  };
  using HashMap = absl::flat_hash_map<kvx::EventHash, Known>;

  void Stored(const std::string& endpoint, const kvx::BlockStored& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A tier's copies of blocks the pool's events named.
  void StoredInTier(const std::string& endpoint, const kvx::BlockStored& e, KvTier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Removed(const std::string& endpoint, const kvx::BlockRemoved& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PrefixIndex* const index_;
  const uint64_t seed_;
  mutable base::Mutex mu_;
  // endpoint -> engine block hash -> what the router knows of the block
  absl::flat_hash_map<std::string, HashMap> keys_ ABSL_GUARDED_BY(mu_);
  int64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace switchyard::router
