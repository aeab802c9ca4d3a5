#include "router/scheduling/p2p_source.h"

#include "absl/strings/numbers.h"
#include "fmt/format.h"

#include "net/host_port.h"

namespace switchyard::router {

std::optional<uint16_t> P2pSourceProducer::KvPort(const Endpoint& endpoint) const {
  const auto label = endpoint.labels.find(kKvPortLabel);
  if (label == endpoint.labels.end())
    return kv_port_;
  int port = 0;
  if (!absl::SimpleAtoi(label->second, &port) || port < 1 || port > 65535)
    return std::nullopt;
  return static_cast<uint16_t>(port);
}

std::optional<std::string> P2pSourceProducer::Source(const CycleState& cycle,
                                                     std::span<const Endpoint> snapshot,
                                                     const Endpoint& picked) const {
  if (!cycle.prefix_match.has_value())
    return std::nullopt;
  const PrefixMatch& match = *cycle.prefix_match;
  // Only endpoints at or past this hold enough more to be worth a pull (never the pick
  // itself: min_extra_tokens_ >= 1).
  const int64_t needed = match.CachedTokens(picked.name) + min_extra_tokens_;
  int64_t best_tokens = needed - 1;  // the source found holds more than this
  std::optional<std::string> best;
  for (const PrefixMatch::Holder& holder : match.cached) {
    const int64_t tokens = holder.pool_tokens;
    if (tokens <= best_tokens)
      continue;
    for (const Endpoint& e : snapshot) {
      if (e.name != holder.name)
        continue;
      const std::optional<uint16_t> port = KvPort(e);
      if (!port.has_value() || !net::ParseHostPort(e.address).ok())
        break;
      // The host as written, brackets of an IPv6 literal included.
      best = fmt::format("{}:{}", e.address.substr(0, e.address.rfind(':')), *port);
      best_tokens = tokens;
      break;
    }
  }
  return best;
}

}  // namespace switchyard::router
