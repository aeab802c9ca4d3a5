// p2p-source-producer (llm-d's, Alpha): once a profile picked the request's endpoint, names a
// peer endpoint that holds more of the prompt's KV cache, so that the picked engine pulls
// those blocks from the peer's KV transfer server instead of computing them. The router
// sends the peer as `x-kv-cache-source-host-port: HOST:PORT` with the attempt.
//
//   parameters: minExtraTokens  int >= 1, default 256: the peer must hold at least this many
//                               more of the prompt's tokens than the picked endpoint
//               kvPort          int 1..65535, optional: every endpoint's KV transfer port;
//                               an endpoint's label switchyard.ai/kv-port (kKvPortLabel)
//                               overrides it. An endpoint with neither, or whose label is not
//                               a port, is never a source.
//
// What each endpoint holds is what the profile's prefix-cache-scorer predicted
// (CycleState::prefix_match): in a profile without one there is no prediction and never a
// source. A peer lends only what its pool holds (not its host or disk tier), so the source
// is the endpoint whose pool holds the most of the prompt among those the scorer saw, other
// than the pick, in the snapshot the pick was made from, with a KV port; the pick counts
// everything it holds, its tiers included. HOST is the host of the source's address as
// written there (an IPv6 literal keeps its brackets).
//
// It is referenced from the profile that picks the request's endpoint (the decode profile
// under a disagg-profile-handler), at most one per profile, without a weight. The router asks
// it only for an attempt with no prefill endpoint (with one, the prefill engine supplies the
// KV). Immutable after construction; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "router/endpoint.h"
#include "router/scheduling/cycle_state.h"

namespace switchyard::router {

class P2pSourceProducer {
 public:
  // REQUIRES: min_extra_tokens >= 1; kv_port, when set, >= 1.
  P2pSourceProducer(int64_t min_extra_tokens, std::optional<uint16_t> kv_port)
      : min_extra_tokens_(min_extra_tokens), kv_port_(kv_port) {}

  // "HOST:PORT" of the KV source for `picked`, which was picked in `cycle` from `snapshot`;
  // nullopt when no endpoint qualifies (the rules above).
  std::optional<std::string> Source(const CycleState& cycle, std::span<const Endpoint> snapshot,
                                    const Endpoint& picked) const;

 private:
  // The endpoint's KV transfer port: its label's, else kv_port_; nullopt when it has none or
  // its label is not a port.
  std::optional<uint16_t> KvPort(const Endpoint& endpoint) const;

  const int64_t min_extra_tokens_;
  const std::optional<uint16_t> kv_port_;
};

}  // namespace switchyard::router
