// PrefixIndex: which endpoints hold which prefix keys (block_keys.h), and where: in the
// engine's pool or in one of its KV tiers (host memory, disk), as the engines' KV events
// name the medium. One LRU of keys per endpoint and tier, the pool's bounded by its
// capacity (its KV cache's block count when known), as llm-d's approximate index keeps it;
// the tiers' by the default capacity. Match walks a request's key chain from the start and
// reports, per endpoint, how many leading blocks it holds in any tier (the greedy longest
// prefix) and their weighted sum, each block counting the best weight among the tiers that
// hold it (llm-d's LongestPrefixScorer: pool 1.0, host 0.8 by default).
//
// Thread-safe: one mutex; Match is a few hash lookups per block. Endpoints are named by
// strings and interned to small ids internally.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"

namespace switchyard::router {

// Where an endpoint holds a block: its pool ("GPU" in KV events), its host tier ("CPU"), its
// disk tier ("DISK").
enum class KvTier : uint8_t { kPool = 0, kHost = 1, kDisk = 2 };
inline constexpr size_t kNumKvTiers = 3;
// The weight of a block held in each tier, by KvTier.
using KvTierWeights = std::array<double, kNumKvTiers>;
inline constexpr KvTierWeights kDefaultKvTierWeights = {1.0, 0.8, 0.6};
// The tier a KV event's medium names (kvx::kMediumGpu, kMediumCpu, kMediumDisk); nullopt for
// a medium the index does not keep.
std::optional<KvTier> KvTierOfMedium(std::string_view medium);
// A tier's bit in a mask of tiers.
inline uint8_t KvTierBit(KvTier tier) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(tier));
}

class PrefixIndex {
 public:
  // REQUIRES: default_capacity > 0.
  explicit PrefixIndex(size_t default_capacity) : default_capacity_(default_capacity) {}

  // Bounds an endpoint's pool LRU (0 restores the default); trims at once.
  void SetCapacity(const std::string& endpoint, size_t capacity);
  // Records that `endpoint` holds `keys` (most recent last) in `tier`, evicting that tier's
  // least recently used keys beyond its capacity.
  void Add(const std::string& endpoint, std::span<const uint64_t> keys,
           KvTier tier = KvTier::kPool);
  void Remove(const std::string& endpoint, std::span<const uint64_t> keys,
              KvTier tier = KvTier::kPool);
  void RemoveEndpoint(const std::string& endpoint);

  struct EndpointMatch {
    std::string endpoint;
    size_t blocks = 0;           // leading keys held, in any tier
    double weighted_blocks = 0;  // the same keys, each weighted by its best tier
    size_t pool_blocks = 0;      // leading keys held in the pool (what a peer can pull)
  };
  // Endpoints holding at least the first key, with their matched prefix lengths.
  std::vector<EndpointMatch> Match(std::span<const uint64_t> keys,
                                   const KvTierWeights& weights = kDefaultKvTierWeights) const;

  // Keys the endpoint holds in `tier`.
  size_t num_keys(const std::string& endpoint, KvTier tier = KvTier::kPool) const;

 private:
  using EndpointId = uint32_t;
  using TierMask = uint8_t;  // bit t: held in KvTier t
  struct TierKeys {
    std::list<uint64_t> lru;  // front: least recent
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> where;
  };
  struct PerEndpoint {
    std::string name;
    size_t capacity = 0;  // of the pool's keys; 0: default
    std::array<TierKeys, kNumKvTiers> tiers;
  };
  struct Holder {
    EndpointId id = 0;
    TierMask tiers = 0;
  };

  EndpointId Intern(const std::string& endpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Trim(EndpointId id, KvTier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears `tier` from the key's holder entry of `id`, dropping the entry when none is left.
  void Drop(EndpointId id, uint64_t key, KvTier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t default_capacity_;
  mutable base::Mutex mu_;
  absl::flat_hash_map<std::string, EndpointId> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<PerEndpoint> endpoints_ ABSL_GUARDED_BY(mu_);
  // key -> endpoints holding it and in which tiers (small; usually a handful).
  absl::flat_hash_map<uint64_t, std::vector<Holder>> holders_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
