// EndpointTable: the router's view of its endpoints: membership (from static config and DNS
// re-resolution), health (active, from scrapes; passive, from outlier detection:
// outlier_detection.h), the last scraped metrics and when they came, and the requests the
// router itself has in flight to each. Scheduling takes a Snapshot per request: every
// healthy endpoint not ejected, with `fresh` computed against the staleness bound, immutable,
// so plugins read plain values while scrapes and requests go on. The snapshot is built once
// and shared by pointer until the table changes (membership, health, metrics, ejections) or
// an endpoint's metrics go stale or its ejection ends, not copied per request; the in-flight
// counts (EndpointLoad) are live in it.
//
// When an endpoint leaves the routing set for a fault (failed scrapes, an ejection), the
// requests waiting on it with nothing sent to their client are woken (EndpointWaiters::Down)
// to be retried elsewhere; its waiters are up again once a snapshot includes it.
//
// Thread-safe: one mutex, held briefly (Snapshot copies a pointer, except when it rebuilds).
// Lock order: a ProxyCall's lock, then this one, then an EndpointWaiters' (a leaf).
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
#include "router/outlier_detection.h"

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

// "<ip>:<port>", brackets around an IPv6 address (what the HTTP client's upstream parser
// takes): the address and name of a discovered member (DNS, Kubernetes).
std::string MemberAddress(const std::string& ip, int port);

// What the router believes about one member, healthy or not.
struct EndpointStatus {
  Endpoint endpoint;          // metrics.fresh computed against the staleness bound
  bool healthy = true;        // by its scrapes
  double metrics_age_s = -1;  // since the last scrape; -1 when never scraped
  EngineKind engine = EngineKind::kVllm;
  bool ejected = false;  // by outlier detection, for ejected_for_s more
  double ejected_for_s = 0;
  uint64_t ejections = 0;  // since it joined
  int consecutive_failures = 0;
  std::string credentials;           // EndpointSpec::credentials
  std::string scrape_error;          // why the last scrape failed; empty when it did not
  double refusing_s = 0;             // left of a Retry-After it answered (ReportRefusing)
  bool scrape_unauthorized = false;  // it failed with 401 or 403
  // The endpoint's KV event stream, when it has one (stale: see kv_event_subscriber.h).
  std::optional<kvx::KvEventSourceStats> kv_events;

  // In the routing set (what scheduling sees).
  bool routable() const { return healthy && !ejected && refusing_s <= 0; }
};

class EndpointTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit EndpointTable(std::chrono::milliseconds staleness,
                         const OutlierDetectionConfig& outlier = {})
      : staleness_(staleness), outlier_(outlier) {}

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

  // Outlier detection (outlier_detection.h): one request attempt on the endpoint `name`,
  // whose EndpointLoad is `load` (the one it started on), failed at `now`. Returns true when
  // that ejected the endpoint (its waiters are woken). Takes the lock only at the
  // consecutive_5xx-th failure in a row.
  bool ReportRequestFailure(std::string_view name, EndpointLoad* load, Clock::time_point now);
  // An attempt succeeded (any answer but a 5xx). Lock-free.
  static void ReportRequestSuccess(EndpointLoad* load) {
    if (load->consecutive_failures.load(std::memory_order_relaxed) != 0)
      load->consecutive_failures.store(0, std::memory_order_relaxed);
  }

  // The endpoint refused a request with 503 and Retry-After (it is draining for shutdown):
  // it leaves the snapshots until `until`, then comes back on its own.
  void ReportRefusing(const std::string& name, Clock::time_point until);

  // The endpoint's KV event stream as its subscriber reports it now.
  void ReportKvEvents(const std::string& name, const kvx::KvEventSourceStats& stats);

  // Healthy endpoints neither ejected nor refusing, in name order.
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
    int consecutive_failures = 0;  // of scrapes
    OutlierState outlier;
    // Its waiters are down: set when it left the routing set for a fault, cleared when a
    // snapshot includes it again.
    mutable bool waiters_down = false;
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
  // `s` left the routing set for a fault: wakes its waiters.
  static void WakeWaiters(State& s);

  const std::chrono::milliseconds staleness_;
  const OutlierDetectionConfig outlier_;
  mutable base::Mutex mu_;
  // std::less<>: found by a string_view name without a copy.
  std::map<std::string, State, std::less<>> endpoints_ ABSL_GUARDED_BY(mu_);
  // The last snapshot, built at snapshot_at_ and right until valid_until_ (when the first
  // endpoint fresh in it goes stale, or the first ejection ends); null when the table
  // changed since.
  mutable std::shared_ptr<const std::vector<Endpoint>> snapshot_ ABSL_GUARDED_BY(mu_);
  mutable Clock::time_point snapshot_at_ ABSL_GUARDED_BY(mu_);
  mutable Clock::time_point valid_until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
