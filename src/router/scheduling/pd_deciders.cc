#include "router/scheduling/pd_deciders.h"

#include <algorithm>

namespace switchyard::router {

bool PrefixBasedPdDecider::Disaggregate(const SchedulingRequest& request,
                                        const CycleState& decode_cycle,
                                        const Endpoint& decode) const {
  if (non_cached_tokens_ <= 0)
    return false;
  const auto prompt = static_cast<int64_t>(request.prompt_tokens.size());
  if (prompt < prompt_tokens_)
    return false;
  const int64_t cached =
      decode_cycle.prefix_match.has_value()
          ? std::min(prompt, decode_cycle.prefix_match->CachedTokens(decode.name))
          : 0;
  return prompt - cached >= non_cached_tokens_;
}

}  // namespace switchyard::router
