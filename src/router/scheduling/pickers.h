// The pickers of llm-d's scheduling framework:
//   max-score-picker        highest total first; ties broken at random (so that equal
//                           endpoints share a burst); maxNumOfEndpoints (1) picks
//   random-picker           uniform, maxNumOfEndpoints picks
//   weighted-random-picker  A-Res sampling (key = U^(1/score)); uniform when every score
//                           is <= 0
// and one of ours (llm-d has no such picker; a baseline for benchmarks, not a good policy):
//   round-robin-picker      ignores scores; the i-th call starts at candidate i mod n and
//                           takes maxNumOfEndpoints in candidate order (wrapping)
// Any thread. All but round-robin are stateless (randomness comes from the caller's
// generator); round-robin keeps one atomic call counter.
#pragma once

#include <atomic>
#include <cstdint>

#include "router/scheduling/plugin.h"

namespace switchyard::router {

class MaxScorePicker final : public Picker {
 public:
  explicit MaxScorePicker(int max_endpoints = 1) : max_endpoints_(max_endpoints) {}
  Candidates Pick(CycleState& cycle, const Candidates& candidates, std::span<const double> scores,
                  std::mt19937_64& rng) override;

 private:
  int max_endpoints_;
};

class RandomPicker final : public Picker {
 public:
  explicit RandomPicker(int max_endpoints = 1) : max_endpoints_(max_endpoints) {}
  Candidates Pick(CycleState& cycle, const Candidates& candidates, std::span<const double> scores,
                  std::mt19937_64& rng) override;

 private:
  int max_endpoints_;
};

class WeightedRandomPicker final : public Picker {
 public:
  explicit WeightedRandomPicker(int max_endpoints = 1) : max_endpoints_(max_endpoints) {}
  Candidates Pick(CycleState& cycle, const Candidates& candidates, std::span<const double> scores,
                  std::mt19937_64& rng) override;

 private:
  int max_endpoints_;
};

class RoundRobinPicker final : public Picker {
 public:
  explicit RoundRobinPicker(int max_endpoints = 1) : max_endpoints_(max_endpoints) {}
  Candidates Pick(CycleState& cycle, const Candidates& candidates, std::span<const double> scores,
                  std::mt19937_64& rng) override;

 private:
  int max_endpoints_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace switchyard::router
