#include "router/scheduling/profile.h"

#include <algorithm>
#include <cmath>

#include "absl/container/inlined_vector.h"

namespace switchyard::router {

ProfileResult SchedulingProfile::Run(const SchedulingRequest& request, CycleState& cycle,
                                     const Candidates& endpoints, std::mt19937_64& rng) const {
  ProfileResult result;
  // The endpoints themselves until a filter narrows them (no copy per pick).
  const Candidates* current = &endpoints;
  Candidates filtered;
  for (Filter* filter : filters_) {
    if (current->empty())
      break;
    filtered = filter->Apply(request, cycle, *current);
    current = &filtered;
  }
  const Candidates& candidates = *current;
  if (candidates.empty())
    return result;
  result.totals.assign(candidates.size(), 0.0);
  absl::InlinedVector<double, 16> scores(candidates.size());
  for (const WeightedScorer& s : scorers_) {
    std::fill(scores.begin(), scores.end(), 0.0);
    s.scorer->Score(request, cycle, candidates, scores);
    for (size_t i = 0; i < candidates.size(); ++i) {
      // NaN counts as 0: a broken scorer must not poison the sum.
      const double clamped = std::isnan(scores[i]) ? 0.0 : std::clamp(scores[i], 0.0, 1.0);
      result.totals[i] += s.weight * clamped;
    }
  }
  result.picked = picker_->Pick(cycle, candidates, result.totals, rng);
  return result;
}

void SchedulingProfile::NotifyPicked(const SchedulingRequest& request, CycleState& cycle,
                                     const Endpoint& picked) const {
  for (PreRequest* p : pre_requests_)
    p->OnPicked(request, cycle, picked);
}

}  // namespace switchyard::router
