// The saturation detectors over endpoint snapshots: the utilization-detector's roofline
// score, staleness and scrape-lag credit; the concurrency-detector's modes; idle capacity;
// both as filters, failing open; and their plugin configuration.
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "router/flow/concurrency_detector.h"
#include "router/flow/utilization_detector.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router::flow {
namespace {

using Clock = std::chrono::steady_clock;

// An endpoint scraped at `scraped_at` with `waiting`/`running` requests and `kv` usage, and
// `active` requests (holding `tokens` tokens) of the router's in flight to it.
Endpoint At(const char* name, Clock::time_point scraped_at, int64_t waiting, int64_t running,
            double kv, int64_t active = 0, int64_t tokens = 0) {
  Endpoint e;
  e.name = name;
  e.metrics.waiting_requests = waiting;
  e.metrics.running_requests = running;
  e.metrics.kv_cache_usage = kv;
  e.metrics.scraped_at = scraped_at;
  e.load = std::make_shared<EndpointLoad>(active, 0);
  e.load->inflight_tokens = tokens;
  return e;
}

Candidates All(const std::vector<Endpoint>& endpoints) {
  Candidates out;
  for (const Endpoint& e : endpoints)
    out.push_back(&e);
  return out;
}

TEST(UtilizationDetectorTest, ScoresTheMostConstrainedResourceAndAveragesThem) {
  const Clock::time_point now = Clock::now();
  const UtilizationDetector detector({});  // queue 5, KV 0.8, 200 ms
  // Queue-bound (10 / 5 = 2), KV-bound (0.4 / 0.8 = 0.5).
  const std::vector<Endpoint> eps = {At("a", now, 10, 4, 0.1, 14), At("b", now, 0, 2, 0.4, 2)};
  EXPECT_DOUBLE_EQ(detector.Saturation(eps, now), (2.0 + 0.5) / 2);
  EXPECT_DOUBLE_EQ(detector.Saturation({}, now), 1.0);
}

TEST(UtilizationDetectorTest, StaleMetricsScoreSaturatedAndSendsSinceTheScrapeCount) {
  const Clock::time_point now = Clock::now();
  const UtilizationDetector detector({});
  // Scraped 300 ms ago: older than the 200 ms threshold.
  EXPECT_DOUBLE_EQ(
      detector.Saturation(
          std::vector<Endpoint>{At("a", now - std::chrono::milliseconds(300), 0, 0, 0)}, now),
      1.0);
  Endpoint unscraped = At("b", now, 0, 0, 0);
  unscraped.metrics.fresh = false;
  EXPECT_DOUBLE_EQ(detector.Saturation(std::vector<Endpoint>{unscraped}, now), 1.0);
  // The scrape saw 1 running; the router has 4 in flight: 3 more queue there (3 / 5).
  EXPECT_DOUBLE_EQ(detector.Saturation(std::vector<Endpoint>{At("c", now, 0, 1, 0, 4)}, now), 0.6);
}

TEST(UtilizationDetectorTest, IdleCapacityIsAFreshEndpointWithNothingQueued) {
  const Clock::time_point now = Clock::now();
  const UtilizationDetector detector({});
  EXPECT_TRUE(detector.HasIdleCapacity(std::vector<Endpoint>{At("a", now, 0, 3, 0.5, 3)}, now));
  EXPECT_FALSE(detector.HasIdleCapacity(std::vector<Endpoint>{At("a", now, 1, 3, 0.5, 4)}, now));
  EXPECT_FALSE(detector.HasIdleCapacity(std::vector<Endpoint>{At("a", now, 0, 3, 0.5, 4)}, now));
  EXPECT_FALSE(detector.HasIdleCapacity(std::vector<Endpoint>{At("a", now, 0, 3, 0.85, 3)}, now));
  EXPECT_FALSE(detector.HasIdleCapacity(
      std::vector<Endpoint>{At("a", now - std::chrono::seconds(1), 0, 0, 0)}, now));
}

TEST(UtilizationDetectorTest, TheFilterKeepsEndpointsUnderTheLimitsWithHeadroomOrAll) {
  const Clock::time_point now = Clock::now();
  UtilizationDetector detector({.queue_depth_threshold = 4,
                                .kv_cache_util_threshold = 0.5,
                                .metrics_staleness_threshold = std::chrono::seconds(10),
                                .headroom = 0.5});
  // Limits: queue 6, KV 0.75.
  const std::vector<Endpoint> eps = {At("ok", now, 6, 0, 0.75, 6), At("queue", now, 7, 0, 0, 7),
                                     At("kv", now, 0, 0, 0.8),
                                     At("stale", now - std::chrono::seconds(11), 0, 0, 0)};
  SchedulingRequest request;
  CycleState cycle;
  const Candidates kept = detector.Apply(request, cycle, All(eps));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0]->name, "ok");
  const std::vector<Endpoint> over = {At("queue", now, 7, 0, 0, 7)};
  EXPECT_EQ(detector.Apply(request, cycle, All(over)).size(), 1u);  // fails open
}

TEST(ConcurrencyDetectorTest, EachModeCountsItsDimension) {
  const Clock::time_point now = Clock::now();
  using Mode = ConcurrencyDetectorOptions::Mode;
  const std::vector<Endpoint> eps = {At("a", now, 0, 0, 0, 6, 100), At("b", now, 0, 0, 0, 2, 700)};
  const ConcurrencyDetector requests({.mode = Mode::kRequests, .max_concurrency = 4});
  EXPECT_DOUBLE_EQ(requests.Saturation(eps, now), 8.0 / 8);
  const ConcurrencyDetector tokens({.mode = Mode::kTokens, .max_token_concurrency = 1000});
  EXPECT_DOUBLE_EQ(tokens.Saturation(eps, now), 800.0 / 2000);
  // Hybrid: per endpoint the larger fraction: a 6/4, b 0.7.
  const ConcurrencyDetector hybrid(
      {.mode = Mode::kHybrid, .max_concurrency = 4, .max_token_concurrency = 1000});
  EXPECT_DOUBLE_EQ(hybrid.Saturation(eps, now), (1.5 + 0.7) / 2);
  EXPECT_DOUBLE_EQ(hybrid.Saturation({}, now), 1.0);
  // Idle: b is under both limits; with b at 4 requests nobody is.
  EXPECT_TRUE(hybrid.HasIdleCapacity(eps, now));
  const std::vector<Endpoint> busy = {At("a", now, 0, 0, 0, 6, 100), At("b", now, 0, 0, 0, 4, 0)};
  EXPECT_FALSE(hybrid.HasIdleCapacity(busy, now));
}

TEST(ConcurrencyDetectorTest, TheFilterAllowsHeadroomAndFailsOpen) {
  const Clock::time_point now = Clock::now();
  ConcurrencyDetector detector({.max_concurrency = 4, .headroom = 0.5});  // limit 6
  const std::vector<Endpoint> eps = {At("a", now, 0, 0, 0, 5), At("b", now, 0, 0, 0, 6)};
  SchedulingRequest request;
  CycleState cycle;
  const Candidates kept = detector.Apply(request, cycle, All(eps));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0]->name, "a");
  const std::vector<Endpoint> full = {At("b", now, 0, 0, 0, 6)};
  EXPECT_EQ(detector.Apply(request, cycle, All(full)).size(), 1u);
}

TEST(DetectorConfigTest, DetectorsAreFoundByNameAndFilterInAProfile) {
  auto set = PluginSet::FromYaml(
      "plugins:\n"
      "- type: utilization-detector\n"
      "  parameters: {queueDepthThreshold: 2, kvCacheUtilThreshold: 0.5,\n"
      "               metricsStalenessThreshold: 1s, headroom: 0.5}\n"
      "- type: concurrency-detector\n"
      "  name: busy\n"
      "  parameters: {concurrencyMode: hybrid, maxConcurrency: 8, maxTokenConcurrency: 4096}\n"
      "- type: queue-scorer\n"
      "schedulingProfiles:\n"
      "- name: default\n"
      "  plugins: [{pluginRef: utilization-detector}, {pluginRef: queue-scorer}]\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const SaturationDetector* utilization = (*set)->saturation_detector("utilization-detector");
  ASSERT_NE(utilization, nullptr);
  ASSERT_NE((*set)->saturation_detector("busy"), nullptr);
  EXPECT_EQ((*set)->saturation_detector("queue-scorer"), nullptr);
  EXPECT_EQ((*set)->saturation_detector("missing"), nullptr);
  // The parameters took: a queue of 4 is past 2 * 1.5, so the profile's filter drops it.
  const Clock::time_point now = Clock::now();
  const std::vector<Endpoint> eps = {At("full", now, 4, 0, 0, 4), At("ok", now, 1, 0, 0, 1)};
  EXPECT_DOUBLE_EQ(utilization->Saturation(eps, now), (2.0 + 0.5) / 2);
  Candidates candidates = All(eps);
  SchedulingRequest request;
  CycleState cycle;
  std::mt19937_64 rng(1);
  const ProfileResult r = (*set)->profile("default")->Run(request, cycle, candidates, rng);
  ASSERT_EQ(r.picked.size(), 1u);
  EXPECT_EQ(r.picked[0]->name, "ok");
}

TEST(DetectorConfigTest, BadParametersNameTheField) {
  for (const auto& [params, field] : std::vector<std::pair<std::string, std::string>>{
           {"type: utilization-detector\n  parameters: {queueDepthThreshold: 0}",
            "queueDepthThreshold"},
           {"type: utilization-detector\n  parameters: {kvCacheUtilThreshold: 1.5}",
            "kvCacheUtilThreshold"},
           {"type: utilization-detector\n  parameters: {metricsStalenessThreshold: soon}",
            "metricsStalenessThreshold"},
           {"type: utilization-detector\n  parameters: {metricsStalenessThreshold: 0s}",
            "metricsStalenessThreshold"},
           {"type: concurrency-detector\n  parameters: {concurrencyMode: bytes}",
            "concurrencyMode"},
           {"type: concurrency-detector\n  parameters: {maxConcurrency: -1}", "maxConcurrency"},
           {"type: concurrency-detector\n  parameters: {headroom: -0.1}", "headroom"},
       }) {
    auto set = PluginSet::FromYaml("plugins:\n- " + params + "\n", "t");
    ASSERT_FALSE(set.ok()) << params;
    EXPECT_NE(set.status().message().find(field), std::string_view::npos) << set.status();
  }
}

}  // namespace
}  // namespace switchyard::router::flow
