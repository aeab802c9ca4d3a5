// The scheduling framework's plugin kinds, in llm-d's shape (EndpointPickerConfig):
// filters narrow the candidate endpoints, scorers give each candidate a score that the
// profile clamps to [0, 1] and weights, and a picker chooses from the weighted sums.
//
// Plugins are built once from the config and then called concurrently by every request
// thread: Filter/Score/Pick must be safe to call from many threads at once (stateless, or
// internally synchronized). Candidates are borrowed from the caller's endpoint snapshot
// for the duration of the call.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "router/endpoint.h"

namespace switchyard::router {

// What the prefix-cache scorer predicted in a scheduling cycle (llm-d's PrefixCacheMatchInfo):
// per scored endpoint, how many of the prompt's tokens it should already hold. Written by
// the scorer's Score (a later prefix scorer in the profile replaces it), read after the
// pick for the prefix-hit metrics, so nothing is matched twice.
struct PrefixMatch {
  int64_t prompt_tokens = 0;
  std::vector<std::pair<std::string, int64_t>> cached_tokens;  // (endpoint name, tokens)

  // 0 for an endpoint the scorer did not see or matched nothing on.
  int64_t CachedTokens(std::string_view endpoint) const {
    for (const auto& [name, tokens] : cached_tokens) {
      if (name == endpoint)
        return tokens;
    }
    return 0;
  }
};

// What the scheduler knows about one request.
struct SchedulingRequest {
  std::string model;
  // The prompt as the engines will see it (chat template applied), when tokenized.
  std::span<const int32_t> prompt_tokens;
  std::string cache_salt;
  // Session headers as the client sent them (x-session-token, x-session-id); the session
  // plugins verify them, never trust them.
  std::string session_token;
  std::string session_id;
  // Scheduling-cycle state plugins leave for their own PreRequest step (llm-d's
  // CycleState): whether no endpoint had any prefix of this request (no-hit-lru-scorer).
  mutable std::optional<bool> cold_prefix;
  // The request's prefix keys, computed once per (block size, mode) by the first prefix
  // plugin that needs them and reused by the others (scorer, filter, no-hit LRU, PreRequest).
  // A list: adding an entry keeps references to the others valid, and an empty one
  // allocates nothing (a deque allocates when made, for every request).
  struct PrefixKeys {
    // What they were computed from.
    std::span<const int32_t> tokens;
    std::string model;
    std::string cache_salt;
    int32_t block_size = 0;
    bool precise = false;
    std::vector<uint64_t> keys;
  };
  mutable std::list<PrefixKeys> prefix_keys;
  // What the prefix-cache scorer predicted in this cycle (PrefixMatch above).
  mutable std::optional<PrefixMatch> prefix_match;
};

using Candidates = std::vector<const Endpoint*>;

class Filter {
 public:
  virtual ~Filter() = default;
  // Returns the candidates to keep, in their given order (possibly none).
  virtual Candidates Apply(const SchedulingRequest& request, const Candidates& candidates) = 0;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Writes one score per candidate; the profile clamps them to [0, 1].
  // REQUIRES: scores.size() == candidates.size().
  virtual void Score(const SchedulingRequest& request, const Candidates& candidates,
                     std::span<double> scores) = 0;
};

class Picker {
 public:
  virtual ~Picker() = default;
  // Chooses endpoints from non-empty candidates by total score: the first is the target,
  // the rest fallbacks in order. `rng` belongs to the calling thread.
  virtual Candidates Pick(const Candidates& candidates, std::span<const double> scores,
                          std::mt19937_64& rng) = 0;
};

// Runs after the profile picked, before the request is sent (llm-d's PreRequest): plugins
// that learn from routing decisions (the approximate prefix index) record them here.
class PreRequest {
 public:
  virtual ~PreRequest() = default;
  virtual void OnPicked(const SchedulingRequest& request, const Endpoint& picked) = 0;
};

}  // namespace switchyard::router
