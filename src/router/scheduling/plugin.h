// The scheduling framework's plugin kinds, in llm-d's shape (EndpointPickerConfig):
// filters narrow the candidate endpoints, scorers give each candidate a score that the
// profile clamps to [0, 1] and weights, and a picker chooses from the weighted sums.
//
// Plugins are built once from the config and then called concurrently by every request
// thread: Filter/Score/Pick must be safe to call from many threads at once (stateless, or
// internally synchronized). What one request's cycle leaves for later steps goes in the
// CycleState every call of that cycle gets (cycle_state.h), never in the plugin. Candidates
// are borrowed from the caller's endpoint snapshot for the duration of the call.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "router/endpoint.h"
#include "router/scheduling/cycle_state.h"

namespace switchyard::router {

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
};

using Candidates = std::vector<const Endpoint*>;

class Filter {
 public:
  virtual ~Filter() = default;
  // Returns the candidates to keep, in their given order (possibly none).
  virtual Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                           const Candidates& candidates) = 0;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Writes one score per candidate; the profile clamps them to [0, 1].
  // REQUIRES: scores.size() == candidates.size().
  virtual void Score(const SchedulingRequest& request, CycleState& cycle,
                     const Candidates& candidates, std::span<double> scores) = 0;
};

class Picker {
 public:
  virtual ~Picker() = default;
  // Chooses endpoints from non-empty candidates by total score: the first is the target,
  // the rest fallbacks in order. `rng` belongs to the calling thread.
  virtual Candidates Pick(CycleState& cycle, const Candidates& candidates,
                          std::span<const double> scores, std::mt19937_64& rng) = 0;
};

// Runs after the profile picked, before the request is sent (llm-d's PreRequest): plugins
// that learn from routing decisions (the approximate prefix index) record them here. `cycle`
// is the one the pick was made in.
class PreRequest {
 public:
  virtual ~PreRequest() = default;
  virtual void OnPicked(const SchedulingRequest& request, CycleState& cycle,
                        const Endpoint& picked) = 0;
};

}  // namespace switchyard::router
