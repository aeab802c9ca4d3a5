// The prefix-cache plugins, over one PrefixIndex (approximate: fed by this router's own
// picks; precise: fed by the engines' KV events through KvEventIndexer):
//
// prefix-cache-scorer (llm-d scorer/prefix):
//   score = w * min(1, matched_tokens / match_length_scale_tokens)^2
//         + (1 - w) * matched_blocks / total_blocks,   w = matchLengthWeight (default 0)
//   where, in precise mode, each matched block counts the weight of the best tier holding it
//   (mediumWeights, by KV-event medium: GPU 1.0, CPU 0.8, DISK 0.6 by default, as llm-d's
//   LongestPrefixScorer weighs gpu and cpu), and leaves the matched tokens per endpoint (any
//   tier: the engine serves them without computing) in the cycle's prefix_match (the
//   router's prefix-hit metrics read the picked endpoint's there).
// prefix-cache-affinity-filter (llm-d filter/prefixcacheaffinity): keeps the "sticky"
//   endpoints whose match ratio is >= affinityThreshold (0.80); keeps everyone when none
//   is sticky, when a random draw falls under explorationProbability, or when the best
//   sticky endpoint's estimated TTFT (its in-flight prompt tokens / peak prefill
//   throughput) exceeds the best non-sticky one's by more than maxTTFTPenaltyMs
//   (0 = always stick).
// no-hit-lru-scorer (llm-d): for a request with no prefix hit anywhere, endpoints score by
//   how long ago they last got such a cold request (never: 1; most recent: lowest), so
//   new prefixes spread; a request with a hit scores 0.5 everywhere.
//
// Keys come from the request's prompt tokens at the plugin's block size (approximate mode
// includes the trailing partial block, as llm-d's approx producer does; precise mode full
// blocks only, as engines publish), computed once per cycle (CycleState::prefix_keys).
// Thread-safe (the index and the LRU lock).
//
// Precise mode and stale streams: when an engine's KV event stream goes stale (events lost
// for good, or the subscriber restarting: kv_event_subscriber.h), its entries are dropped
// from the index at once, so these plugins see it as holding nothing cached (no prefix
// credit, a cold endpoint to the no-hit LRU) until its stream is back in order and the
// index has been rebuilt from the engine's replay; /debug/endpoints shows kv_events.stale.
#pragma once

#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"
#include "router/prefix/prefix_index.h"
#include "router/scheduling/plugin.h"
#include "router/scheduling/scheduling_observer.h"

namespace switchyard::router {

struct PrefixMatchOptions {
  bool precise = false;
  int32_t block_size = 16;
  size_t max_blocks = 8192;  // llm-d caps the match at maxPrefixTokensToMatch / block size
  KvTierWeights tier_weights = kDefaultKvTierWeights;
};

// One candidate's match: leading blocks held in any tier, their tier-weighted sum, and the
// leading blocks held in the pool.
struct CandidateMatch {
  size_t blocks = 0;
  double weighted_blocks = 0;
  size_t pool_blocks = 0;
};

// Matches requests against an index. Borrows the index.
class PrefixMatcher {
 public:
  // `observers` (may be null) hears of what Record learns.
  PrefixMatcher(PrefixIndex* index, const PrefixMatchOptions& options,
                const ObserverSlot* observers = nullptr)
      : index_(index), options_(options), observers_(observers) {}

  // The request's keys for this matcher's block size and mode (cached in `cycle`).
  const std::vector<uint64_t>& Keys(const SchedulingRequest& request, CycleState& cycle) const;
  // Each candidate's match, in candidate order.
  std::vector<CandidateMatch> Matches(std::span<const uint64_t> keys,
                                      const Candidates& candidates) const;
  // Approximate mode: records that `picked` now holds the request's prefix, and tells the
  // observer.
  void Record(const SchedulingRequest& request, CycleState& cycle, const Endpoint& picked);
  const PrefixMatchOptions& options() const { return options_; }

 private:
  PrefixIndex* const index_;
  const PrefixMatchOptions options_;
  const ObserverSlot* observers_;
};

struct PrefixScorerOptions {
  double match_length_weight = 0;
  double match_length_scale_tokens = 8192;
};

class PrefixCacheScorer final : public Scorer, public PreRequest {
 public:
  PrefixCacheScorer(PrefixMatcher matcher, const PrefixScorerOptions& options)
      : matcher_(std::move(matcher)), options_(options) {}
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
  void OnPicked(const SchedulingRequest& request, CycleState& cycle,
                const Endpoint& picked) override {
    matcher_.Record(request, cycle, picked);
  }

 private:
  PrefixMatcher matcher_;
  const PrefixScorerOptions options_;
};

struct PrefixAffinityOptions {
  double affinity_threshold = 0.80;
  double exploration_probability = 0;
  double max_ttft_penalty_ms = 18'000;
  double peak_prefill_tokens_per_s = 15'928;
};

class PrefixCacheAffinityFilter final : public Filter {
 public:
  PrefixCacheAffinityFilter(PrefixMatcher matcher, const PrefixAffinityOptions& options,
                            uint64_t seed)
      : matcher_(std::move(matcher)), options_(options), rng_(seed) {}
  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;

 private:
  double TtftMs(const Endpoint& e) const;

  PrefixMatcher matcher_;
  const PrefixAffinityOptions options_;
  base::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

class NoHitLruScorer final : public Scorer, public PreRequest {
 public:
  NoHitLruScorer(PrefixMatcher matcher, size_t lru_size)
      : matcher_(std::move(matcher)), lru_size_(lru_size) {}
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
  // A cold request (as Score found it in `cycle`) moves its endpoint to the most recently
  // used end.
  void OnPicked(const SchedulingRequest& request, CycleState& cycle,
                const Endpoint& picked) override;

 private:
  PrefixMatcher matcher_;
  const size_t lru_size_;
  base::Mutex mu_;
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // front: least recent
  absl::flat_hash_map<std::string, std::list<std::string>::iterator> where_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
