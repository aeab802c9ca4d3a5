// Session affinity, as llm-d's session-affinity-scorer / -filter (shared/reference/llm-d.md
// §4), in two strategies:
//   token (stateless, llm-d's encoded_endpoint_header): the router answers with an
//     `x-session-token` naming the endpoint that served, and the client echoes it. Unlike
//     llm-d's plain base64, our token carries an HMAC-SHA256 tag under a router secret, so a
//     client cannot steer its requests to an endpoint of its choosing with a token the
//     router never issued; a bad tag counts as no token.
//   session_id (stateful): `x-session-id` maps to the endpoint of the session's last
//     request, forgotten after ttl of disuse.
// The scorer gives the session's endpoint 1 and the others 0; the filter keeps only the
// session's endpoint when it is a candidate and keeps everyone otherwise (fail open: a
// departed endpoint must not make the request fail).
//
// Thread-safe (the stateful map locks).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"
#include "router/scheduling/plugin.h"
#include "router/scheduling/scheduling_observer.h"

namespace switchyard::router {

// Issues and verifies x-session-token values: base64url(endpoint) "." base64url(tag), the
// tag the first 16 bytes of HMAC-SHA256(secret, endpoint). Every proxied response carries
// a token, so the tags and tokens of the endpoints it issued for are kept (an HMAC costs
// microseconds; a lookup does not). Only Issue adds to that cache: a forged token's endpoint
// never does.
// Thread-safe.
class SessionTokenCodec {
 public:
  explicit SessionTokenCodec(std::string secret) : secret_(std::move(secret)) {}
  std::string Issue(std::string_view endpoint) const;
  // The endpoint a token names, or nullopt for anything malformed or forged.
  std::optional<std::string> Verify(std::string_view token) const;

 private:
  // The most tags kept; past it the cache starts over (endpoints come and go with DNS).
  static constexpr size_t kMaxCachedTags = 4096;

  struct Signed {
    std::string tag;
    std::string token;
  };

  std::string Tag(std::string_view endpoint) const;
  // The endpoint's cached tag or token (`field`), else both computed now and cached when
  // `remember`.
  std::string Cached(std::string_view endpoint, bool remember, std::string Signed::*field) const;

  const std::string secret_;
  mutable base::Mutex mu_;
  mutable absl::flat_hash_map<std::string, Signed> signed_ ABSL_GUARDED_BY(mu_);
};

class SessionAffinity final : public Filter, public Scorer, public PreRequest {
 public:
  enum class Strategy { kToken, kSessionId };
  using Clock = std::chrono::steady_clock;

  // `codec` is borrowed (token strategy only); `observers` (may be null) hears of each
  // binding OnPicked makes.
  SessionAffinity(Strategy strategy, const SessionTokenCodec* codec, std::chrono::seconds ttl,
                  const ObserverSlot* observers = nullptr)
      : strategy_(strategy), codec_(codec), ttl_(ttl), observers_(observers) {}

  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
  // Session-id strategy: remembers where the session went, and tells the observer.
  void OnPicked(const SchedulingRequest& request, CycleState& cycle,
                const Endpoint& picked) override;
  // Session-id strategy: binds a session another replica bound (not told to the observer).
  void Bind(std::string_view session_id, const std::string& endpoint);

  // The endpoint the request's session is bound to, if any (verified / not expired).
  std::optional<std::string> SessionEndpoint(const SchedulingRequest& request);

 private:
  struct Entry {
    std::string endpoint;
    Clock::time_point last_used;
  };

  void Remember(std::string_view session_id, const std::string& endpoint);

  const Strategy strategy_;
  const SessionTokenCodec* codec_;
  const std::chrono::seconds ttl_;
  const ObserverSlot* observers_;
  base::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  Clock::time_point next_sweep_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
