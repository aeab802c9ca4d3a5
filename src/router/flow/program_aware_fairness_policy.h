// program-aware-fairness with its `las` strategy (llm-d's least attained service over
// weighted tokens): the flow that has had the least service lately goes next.
//
// Each flow's attained service decays in wall-clock time with a half-life (llm-d's
// lasHalfLifeSeconds, 60 s), applied lazily when it is read or charged, so a flow that went
// idle competes on near-equal terms when it returns. A pick scores each candidate
//   weight_service * (1 - norm(service)) + weight_head_wait * norm(head wait)
// with min-max normalisation over the candidates (0.5 for all when they are equal), llm-d's
// 0.8 / 0.2 weights by default, and takes the highest (the first in flow id order on a tie):
// the head's wait breaks ties on a cold start, when every flow has attained nothing.
//
// Where this departs from llm-d: llm-d charges prompt + 2 x completion tokens from the usage
// of a finished response; the flow controller never sees responses, so a flow is charged at
// dispatch with the caller's estimate, FlowItem::cost_tokens (prompt + max tokens), divided by
// the flow's fairness weight (llm-d has no weights). Charging at dispatch also stops a flow
// from taking many turns in a row before its first response ends. Flows whose service has
// decayed below one token are forgotten, at most once per half-life.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "router/flow/fairness_policy.h"

namespace switchyard::router::flow {

struct ProgramAwareFairnessOptions {
  double weight_service = 0.8;
  double weight_head_wait = 0.2;
  Clock::duration half_life = std::chrono::seconds(60);  // REQUIRES: > 0
};

class ProgramAwareFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "program-aware-fairness";

  explicit ProgramAwareFairnessPolicy(ProgramAwareFairnessOptions options = {})
      : options_(options) {}

  size_t Pick(std::span<const FlowCandidate> candidates, const OrderingPolicy& ordering,
              Clock::time_point now) override;
  void Dispatched(const FlowCandidate& flow, Clock::time_point now) override;
  std::string_view type() const override { return kType; }

  // `flow_id`'s attained service at `now`, in weighted tokens (0 for a flow never charged).
  double AttainedService(std::string_view flow_id, Clock::time_point now) const;

 private:
  struct Service {
    double tokens = 0;
    Clock::time_point as_of;  // when `tokens` was last decayed
  };
  double Decayed(const Service& service, Clock::time_point now) const;
  void ForgetIdle(Clock::time_point now);

  const ProgramAwareFairnessOptions options_;
  std::map<std::string, Service, std::less<>> service_;  // by flow id
  Clock::time_point last_forget_;
};

}  // namespace switchyard::router::flow
