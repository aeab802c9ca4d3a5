// SchedulingProfile: one named pipeline of an EndpointPickerConfig: filters in order, then
// every scorer (score clamped to [0, 1], times its weight, summed per endpoint), then the
// picker. An empty candidate list after the filters means no endpoint can serve the request
// (llm-d answers 429). It may hold a p2p-source-producer, which the router asks after the pick.
//
// Immutable after construction; Run may be called from many threads at once. Borrows its
// plugins (the PluginSet owns them).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "router/scheduling/p2p_source.h"
#include "router/scheduling/plugin.h"

namespace switchyard::router {

struct WeightedScorer {
  std::string name;
  Scorer* scorer = nullptr;
  double weight = 1.0;
};

struct ProfileResult {
  Candidates picked;  // empty: nothing passed the filters
  // The total score of each candidate that reached the scorers, in candidate order.
  std::vector<double> totals;
};

class SchedulingProfile {
 public:
  SchedulingProfile(std::string name, std::vector<Filter*> filters,
                    std::vector<WeightedScorer> scorers, Picker* picker,
                    std::vector<PreRequest*> pre_requests = {},
                    const P2pSourceProducer* p2p_source = nullptr)
      : name_(std::move(name)),
        filters_(std::move(filters)),
        scorers_(std::move(scorers)),
        picker_(picker),
        pre_requests_(std::move(pre_requests)),
        p2p_source_(p2p_source) {}

  const std::string& name() const { return name_; }
  // The profile's p2p-source-producer; null when it has none.
  const P2pSourceProducer* p2p_source() const { return p2p_source_; }

  // One scheduling cycle; `cycle` (cycle_state.h) holds what its plugins left once it returns.
  ProfileResult Run(const SchedulingRequest& request, CycleState& cycle,
                    const Candidates& endpoints, std::mt19937_64& rng) const;
  // Tells the profile's PreRequest plugins where the request goes. `cycle`: the one Run
  // picked `picked` in.
  void NotifyPicked(const SchedulingRequest& request, CycleState& cycle,
                    const Endpoint& picked) const;

 private:
  std::string name_;
  std::vector<Filter*> filters_;
  std::vector<WeightedScorer> scorers_;
  Picker* picker_;
  std::vector<PreRequest*> pre_requests_;
  const P2pSourceProducer* p2p_source_;
};

}  // namespace switchyard::router
