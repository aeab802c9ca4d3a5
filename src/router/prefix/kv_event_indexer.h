// KvEventIndexer: the precise prefix index's writer. It applies one engine's KV events to a
// PrefixIndex: BlockStored blocks are keyed from their token ids (block_keys.h), chained to
// the parent block's key, so the router's keys never depend on the engine's hash function
// or seed; BlockRemoved drops the keys of the engine hashes it names; events of a KV tier
// (medium other than "GPU", which carry no tokens) are not indexed yet; AllBlocksCleared
// drops the endpoint's whole entry. Events for blocks whose parent is unknown (the router
// joined late and the replay did not reach back far enough) are skipped: without the
// parent's key their prefix cannot be named.
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
  void Stored(const std::string& endpoint, const kvx::BlockStored& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Removed(const std::string& endpoint, const kvx::BlockRemoved& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PrefixIndex* const index_;
  const uint64_t seed_;
  mutable base::Mutex mu_;
  // endpoint -> engine block hash -> router key
  absl::flat_hash_map<std::string, absl::flat_hash_map<kvx::EventHash, uint64_t>> keys_
      ABSL_GUARDED_BY(mu_);
  int64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace switchyard::router
