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
#include <string>
#include <vector>

#include "base/mutex.h"
#include "router/endpoint.h"
#include "router/engine_metrics.h"

namespace switchyard::router {

struct EndpointSpec {
  std::string name;     // unique; usually the address
  std::string address;  // host:port
  std::map<std::string, std::string> labels;
  EngineKind engine = EngineKind::kVllm;
  std::string pool;
};

// What the router believes about one member, healthy or not.
struct EndpointStatus {
  Endpoint endpoint;  // metrics.fresh computed against the staleness bound
  bool healthy = true;
  double metrics_age_s = -1;  // since the last scrape; -1 when never scraped
  EngineKind engine = EngineKind::kVllm;
};

class EndpointTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit EndpointTable(std::chrono::milliseconds staleness) : staleness_(staleness) {}

  // Replaces the membership of `pool`: new names are added (healthy until a check says
  // otherwise, metrics unknown), missing ones removed, survivors keep their state.
  void SetPoolMembers(const std::string& pool, const std::vector<EndpointSpec>& specs);
  void ReportMetrics(const std::string& name, const EndpointMetrics& metrics, Clock::time_point at);
  // A failed scrape (refused, timed out, not 200, unreadable). The endpoint leaves the
  // snapshots after kUnhealthyAfterFailures in a row, not at the first: one slow scrape on a
  // busy router or engine is no reason to stop routing there. A good scrape (ReportMetrics)
  // brings it back and resets the count.
  void ReportScrapeFailure(const std::string& name);
  static constexpr int kUnhealthyAfterFailures = 3;
  // The endpoint answered but exposes no metrics (an engine without a /metrics route):
  // healthy, failure count reset, metrics left as they were (unknown: never fresh).
  void ReportReachable(const std::string& name);

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
