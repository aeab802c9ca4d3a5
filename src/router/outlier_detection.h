// Outlier detection: passive health, as Envoy's outlier detection does it. Scrapes of
// /metrics say whether an endpoint is up, not whether it serves: one that scrapes fine but
// fails every request looks idle and attracts traffic. So the router also counts each
// endpoint's request attempts that fail in a row (connect errors, resets, 5xx heads,
// malformed responses, streams cut short; never client errors, which say nothing about the
// endpoint, nor client disconnects) and at `consecutive_5xx` in a row ejects the endpoint
// from the routing set for base_ejection_time x the number of times it was ejected, capped at
// max_ejection_time, unless max_ejection_percent of its pool is ejected already (one endpoint
// may always be, as in Envoy). A success resets the count; each `interval` that passes
// without an ejection takes one off the multiplier. An ejected endpoint returns by itself when
// its time is up (and is ejected again, for longer, if it still fails).
//
// Router YAML (Envoy's names, camelCase as the rest of the file; defaults are Envoy's):
//   outlierDetection: {consecutive5xx: 5, intervalMs: 10000, baseEjectionTimeMs: 30000,
//                      maxEjectionTimeMs: 300000, maxEjectionPercent: 10}
// consecutive5xx: 0 turns it off.
//
// Plain values; OutlierState is kept by the endpoint table, under its lock.
#pragma once

#include <chrono>
#include <cstdint>

namespace switchyard::router {

struct OutlierDetectionConfig {
  int consecutive_5xx = 5;  // failures in a row that eject; 0: never eject
  std::chrono::milliseconds interval{10'000};
  std::chrono::milliseconds base_ejection_time{30'000};
  std::chrono::milliseconds max_ejection_time{300'000};
  int max_ejection_percent = 10;  // of a pool's members, ejected at once (at least one)
};

// Whether one more member of a pool of `members`, `ejected` of them ejected now, may be.
bool MayEject(const OutlierDetectionConfig& config, int members, int ejected);

// One endpoint's ejections.
class OutlierState {
 public:
  using Clock = std::chrono::steady_clock;

  bool ejected(Clock::time_point now) const { return now < ejected_until_; }
  Clock::time_point ejected_until() const { return ejected_until_; }
  // Times ejected since the endpoint joined.
  uint64_t ejections() const { return ejections_; }
  // Ejects the endpoint from `now`. REQUIRES: !ejected(now).
  void Eject(const OutlierDetectionConfig& config, Clock::time_point now);

 private:
  int multiplier_ = 0;  // the ejection time's, in base ejection times
  Clock::time_point ejected_until_{};
  uint64_t ejections_ = 0;
};

}  // namespace switchyard::router
