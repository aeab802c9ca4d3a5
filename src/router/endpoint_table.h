// EndpointTable: the router's view of its endpoints: membership (from static config and DNS
// re-resolution), health, the last scraped metrics and when they came, and the requests
// the router itself has in flight to each. Scheduling takes a Snapshot per request: every
// healthy endpoint with `fresh` computed against the staleness bound, immutable, so plugins
// read plain values while scrapes and requests go on. The snapshot is built once and shared
// by pointer until the table changes (membership, health, metrics) or an endpoint's metrics
// go stale, not copied per request; the in-flight counts (EndpointLoad) are live in it.
//
// Thread-safe: one mutex, held briefly (Snapshot copies a pointer, except when it rebuilds).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "kvx/kv_event_subscriber.h"
#include "router/endpoint.h"
#include "router/engine_metrics.h"

namespace switchyard::router {

struct EndpointSpec {
  std::string name;     // unique; usually the address
  std::string address;  // host:port
  std::map<std::string, std::string> labels;
  EngineKind engine = EngineKind::kVllm;
  std::string pool;
  // Credentials for this upstream (router_config.h): the Authorization header value sent
  // with forwarded requests and scrapes ("Bearer <key>"; empty: none), and where the key
  // came from ("env NAME", "file PATH") for /debug/endpoints. The key is never printed.
  std::string authorization;
  std::string credentials;
};

// What the router believes about one member, healthy or not.
struct EndpointStatus {
  Endpoint endpoint;  // metrics.fresh computed against the staleness bound
  bool healthy = true;
  double metrics_age_s = -1;  // since the last scrape; -1 when never scraped
  EngineKind engine = EngineKind::kVllm;
  std::string credentials;           // EndpointSpec::credentials
  std::string scrape_error;          // why the last scrape failed; empty when it did not
  double refusing_s = 0;             // left of a Retry-After it answered (ReportRefusing)
  bool scrape_unauthorized = false;  // it failed with 401 or 403
  // The endpoint's KV event stream, when it has one (stale: see kv_event_subscriber.h).
  std::optional<kvx::KvEventSourceStats> kv_events;
};

class EndpointTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit EndpointTable(std::chrono::milliseconds staleness) : staleness_(staleness) {}

  // Replaces the membership of `pool`: new names are added (healthy until a check says
  // otherwise, metrics unknown), missing ones removed, survivors keep their state.
  void SetPoolMembers(const std::string& pool, const std::vector<EndpointSpec>& specs);
  void ReportMetrics(const std::string& name, const EndpointMetrics& metrics, Clock::time_point at);
  // A failed scrape (refused, timed out, not 200, unreadable), and why. The endpoint leaves
  // the snapshots after kUnhealthyAfterFailures in a row, not at the first: one slow scrape
  // on a busy router or engine is no reason to stop routing there. A good scrape
  // (ReportMetrics) brings it back and resets the count. `http_status` 401 or 403 marks the
  // failure as one of credentials (the engine wants a key the router lacks or has wrong),
  // shown apart in /debug/endpoints and the metrics. Returns whether `error` differs from
  // the last failure's (the caller logs each new reason once, not every scrape).
  bool ReportScrapeFailure(const std::string& name, std::string_view error = "",
                           int http_status = 0);
  static constexpr int kUnhealthyAfterFailures = 3;
  // The endpoint answered but exposes no metrics (an engine without a /metrics route):
  // healthy, failure count reset, metrics left as they were (unknown: never fresh).
  void ReportReachable(const std::string& name);

  // The endpoint refused a request with 503 and Retry-After (it is draining for shutdown):
  // it leaves the snapshots until `until`, then comes back on its own.
  void ReportRefusing(const std::string& name, Clock::time_point until);

  // The endpoint's KV event stream as its subscriber reports it now.
  void ReportKvEvents(const std::string& name, const kvx::KvEventSourceStats& stats);

  // Healthy endpoints, in name order.
  std::shared_ptr<const std::vector<Endpoint>> Snapshot(Clock::time_point now) const;
  std::vector<EndpointSpec> Members() const;
  // Every member, healthy or not, in name order (GET /debug/endpoints, router metrics).
  std::vector<EndpointStatus> Statuses(Clock::time_point now) const;
  // What the router believes about each endpoint (GET /debug/endpoints).
  std::string DebugJson(Clock::time_point now) const;

 private:
  struct State {
    EndpointSpec spec;
    bool healthy = true;
    int consecutive_failures = 0;
    EndpointMetrics metrics;
    bool has_metrics = false;
    Clock::time_point metrics_at;
    std::string scrape_error;
    bool scrape_unauthorized = false;
    Clock::time_point refusing_until;  // ReportRefusing
    std::optional<kvx::KvEventSourceStats> kv_events;
    // Shared with the snapshots' Endpoints, through which requests update it.
    std::shared_ptr<EndpointLoad> load = std::make_shared<EndpointLoad>();
  };
  Endpoint ToEndpoint(const State& s, Clock::time_point now) const;
  // The snapshot is to be rebuilt (membership, health or metrics changed).
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { snapshot_ = nullptr; }

  const std::chrono::milliseconds staleness_;
  mutable base::Mutex mu_;
  std::map<std::string, State> endpoints_ ABSL_GUARDED_BY(mu_);
  // The last snapshot, built at snapshot_at_ and right until fresh_until_ (when the first
  // endpoint fresh in it goes stale); null when the table changed since.
  mutable std::shared_ptr<const std::vector<Endpoint>> snapshot_ ABSL_GUARDED_BY(mu_);
  mutable Clock::time_point snapshot_at_ ABSL_GUARDED_BY(mu_);
  mutable Clock::time_point fresh_until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
