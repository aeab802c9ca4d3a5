// RequestRouting: the scheduling of one admitted request, shared by the router's fronts (the
// HTTP proxy's ProxyCall and the ext_proc server): the profile picks from a fresh snapshot per
// attempt, without the endpoints already tried. With a disagg-profile-handler that profile is
// the decode one, and its decider may have the prefill profile pick a prefill endpoint for
// the attempt too (from the whole snapshot but the decode pick). An attempt without a prefill
// endpoint gets a KV source when the profile's p2p-source-producer names one.
//
// It also holds what the request's end gives back: its drain ticket, its tenant's
// concurrency and its flow's in-flight count (released by the destructor).
//
// Threads: one request's calls come one at a time (its front's lock or thread); different
// requests' routings run on any threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

#include "router/endpoint_table.h"
#include "router/flow/flow_controller.h"
#include "router/flow/tenant_limiter.h"
#include "router/flow/tenant_table.h"
#include "router/internal/drain.h"
#include "router/internal/proxy_call.h"
#include "router/router_metrics.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router::internal {

// Whom a request is charged to, and what its end must give back.
struct TenantAccount {
  const flow::Tenant* tenant = nullptr;
  flow::TenantLimiter* limiter = nullptr;
  // Flow control's, when the request goes through it (null: the gate is off).
  flow::FlowController* flow = nullptr;
  std::string fairness_id;
  int32_t priority = 0;
};

class RequestRouting final : public ProxyRouting {
 public:
  using Clock = std::chrono::steady_clock;

  // `ready`: when the request was ready to schedule (a clock read just made), the first
  // pick's start.
  // `ticket`: the request counts as in flight for the drain until this routing (and the
  // call that owns it) is gone.
  RequestRouting(const SchedulingProfile* profile, EndpointTable* table, RouterMetrics* metrics,
                 const PluginSet* plugins, std::vector<int32_t> prompt_tokens,
                 Clock::time_point ready, std::unique_ptr<Drain::Ticket> ticket,
                 TenantAccount account);
  // The request's end, however it ended: its tenant's concurrency and its flow's in-flight
  // count (when it was dispatched) go down.
  ~RequestRouting() override;

  // Flow control dispatched the request: its end is the flow's.
  void Dispatched() { dispatched_ = true; }
  // The limiter's TryStart counted it (flow control off): its end is the tenant's.
  void MarkStarted() { started_ = true; }

  // What the plugins see; its prompt_tokens view this object's tokens.
  SchedulingRequest& request() { return request_; }
  Drain::Ticket& ticket() { return *ticket_; }
  int64_t prompt_tokens() const { return static_cast<int64_t>(prompt_tokens_.size()); }

  std::optional<ProxyTarget> NextTarget(absl::Span<const std::string> tried) override;
  void Picked(const ProxyTarget& target) override;
  std::string SessionToken(std::string_view endpoint) override;
  void AttemptEnded(const ProxyTarget& target, bool failed) override;
  void Refused(const ProxyTarget& target, std::chrono::seconds retry_after) override;
  void Generated(int64_t tokens) override;

 private:
  // The disagg-profile-handler's second step, after the decode profile picked `decode`:
  // nullopt when the decider keeps the prompt on it or no prefill endpoint is found.
  std::optional<ProxyTarget::Prefill> PickPrefill(const Endpoint& decode, std::mt19937_64& rng);

  const SchedulingProfile* const profile_;
  const DisaggProfiles* const disagg_;  // null: no prefill/decode disaggregation
  EndpointTable* const table_;
  RouterMetrics* const metrics_;
  const PluginSet* const plugins_;
  const std::vector<int32_t> prompt_tokens_;
  SchedulingRequest request_;
  // The state of the last pick's cycle, the snapshot it picked from and its pick, for Picked.
  CycleState cycle_;
  std::shared_ptr<const std::vector<Endpoint>> snapshot_;
  const Endpoint* last_pick_ = nullptr;
  // The prefill profile's cycle and pick, when the last pick has one.
  CycleState prefill_cycle_;
  const Endpoint* prefill_pick_ = nullptr;
  // The last pick's KV source (ProxyTarget::kv_source views it); empty: none.
  std::string kv_source_;
  std::optional<Clock::time_point> first_start_;  // until the first pick
  const std::unique_ptr<Drain::Ticket> ticket_;
  const TenantAccount account_;
  bool dispatched_ = false;
  bool started_ = false;
};

}  // namespace switchyard::router::internal
