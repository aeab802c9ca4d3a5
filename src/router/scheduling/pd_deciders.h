// Prefill/decode deciders, as llm-d's (disagg-profile-handler's `deciders.prefill`): after the
// decode profile picked an endpoint, whether the request's prompt is worth prefilling on a
// prefill endpoint and moving its KV over, rather than computing it on the decode endpoint.
//   prefix-based-pd-decider  disaggregate iff nonCachedTokens > 0, the prompt has at least
//                            promptTokens tokens, and at least nonCachedTokens of them are not
//                            cached on the decode endpoint (as its profile's prefix-cache
//                            scorer predicted: CycleState::prefix_match; none predicted: the
//                            whole prompt counts as uncached)
//   always-disagg-pd-decider always
// Immutable after construction; any thread.
#pragma once

#include <cstdint>

#include "router/scheduling/plugin.h"

namespace switchyard::router {

class PdDecider {
 public:
  virtual ~PdDecider() = default;
  // `decode_cycle`: the cycle in which the decode profile picked `decode`.
  virtual bool Disaggregate(const SchedulingRequest& request, const CycleState& decode_cycle,
                            const Endpoint& decode) const = 0;
};

class PrefixBasedPdDecider final : public PdDecider {
 public:
  // `non_cached_tokens` 0 never disaggregates (llm-d's default).
  PrefixBasedPdDecider(int64_t non_cached_tokens, int64_t prompt_tokens)
      : non_cached_tokens_(non_cached_tokens), prompt_tokens_(prompt_tokens) {}
  bool Disaggregate(const SchedulingRequest& request, const CycleState& decode_cycle,
                    const Endpoint& decode) const override;

 private:
  const int64_t non_cached_tokens_;
  const int64_t prompt_tokens_;
};

class AlwaysDisaggPdDecider final : public PdDecider {
 public:
  bool Disaggregate(const SchedulingRequest&, const CycleState&, const Endpoint&) const override {
    return true;
  }
};

}  // namespace switchyard::router
