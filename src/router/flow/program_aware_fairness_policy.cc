#include "router/flow/program_aware_fairness_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace switchyard::router::flow {
namespace {

// Min-max normalisation to [0, 1]; 0.5 when the range is empty (no signal), as llm-d.
double Normalize(double v, double lo, double hi) {
  return hi == lo ? 0.5 : (v - lo) / (hi - lo);
}

}  // namespace

double ProgramAwareFairnessPolicy::Decayed(const Service& service, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - service.as_of).count();
  if (elapsed <= 0)
    return service.tokens;
  const double half_life = std::chrono::duration<double>(options_.half_life).count();
  return service.tokens * std::exp2(-elapsed / half_life);
}

double ProgramAwareFairnessPolicy::AttainedService(std::string_view flow_id,
                                                   Clock::time_point now) const {
  const auto it = service_.find(flow_id);
  return it == service_.end() ? 0 : Decayed(it->second, now);
}

size_t ProgramAwareFairnessPolicy::Pick(std::span<const FlowCandidate> candidates,
                                        const OrderingPolicy&, Clock::time_point now) {
  ForgetIdle(now);
  std::vector<double> service(candidates.size());
  std::vector<double> wait_s(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    service[i] = AttainedService(candidates[i].flow_id, now);
    wait_s[i] =
        std::max(0.0, std::chrono::duration<double>(now - candidates[i].head->enqueued).count());
  }
  const auto [service_lo, service_hi] = std::minmax_element(service.begin(), service.end());
  const auto [wait_lo, wait_hi] = std::minmax_element(wait_s.begin(), wait_s.end());
  size_t best = 0;
  double best_score = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double score =
        options_.weight_service * (1 - Normalize(service[i], *service_lo, *service_hi)) +
        options_.weight_head_wait * Normalize(wait_s[i], *wait_lo, *wait_hi);
    if (i == 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

void ProgramAwareFairnessPolicy::Dispatched(const FlowCandidate& flow, Clock::time_point now) {
  auto it = service_.find(flow.flow_id);
  if (it == service_.end())
    it = service_.emplace(std::string(flow.flow_id), Service{0, now}).first;
  Service& s = it->second;
  s.tokens =
      Decayed(s, now) +
      static_cast<double>(std::max<int64_t>(0, flow.head->request.cost_tokens)) / flow.weight;
  s.as_of = std::max(s.as_of, now);
}

void ProgramAwareFairnessPolicy::ForgetIdle(Clock::time_point now) {
  if (now - last_forget_ < options_.half_life)
    return;
  last_forget_ = now;
  std::erase_if(service_, [&](const auto& entry) { return Decayed(entry.second, now) < 1; });
}

}  // namespace switchyard::router::flow
