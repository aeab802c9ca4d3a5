// The flow controller on a stepped clock: strict priority, a refused band holding back the
// bands below it, fairness between flows, per-flow concurrency, every capacity limit, TTLs in
// both regimes and across a change, cancel, shutdown, re-entrant callbacks, observability.
#include "router/flow/flow_controller.h"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "flow_test_util.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(FlowControllerTest, BandsGoInStrictPriorityOrder) {
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  fc.Enqueue(out.Item("low", "t", 0), kT0);
  fc.Enqueue(out.Item("high1", "t", 10), kT0);
  fc.Enqueue(out.Item("mid", "u", 5), kT0);
  fc.Enqueue(out.Item("high2", "u", 10), kT0);
  fc.Enqueue(out.Item("shed", "u", -1), kT0);
  EXPECT_THAT(out.Take(), IsEmpty());
  gate.AllowAll();
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("high1", "high2", "mid", "low", "shed"));
}

TEST(FlowControllerTest, PumpAndOnWaitingSayWhetherRequestsStillWait) {
  TestGate gate;
  Outcomes out;
  int waiting_calls = 0;
  FlowControllerOptions options;
  options.on_waiting = [&waiting_calls] { ++waiting_calls; };
  FlowController fc(FlowControlConfig{}, &gate, options);
  // Dispatched at once: nothing waits, nobody is told.
  fc.Enqueue(out.Item("now", "t", 0), kT0);
  EXPECT_EQ(waiting_calls, 0);
  EXPECT_FALSE(fc.Pump(kT0));
  gate.RefuseAll();
  fc.Enqueue(out.Item("later", "t", 0), kT0);
  EXPECT_EQ(waiting_calls, 1);
  EXPECT_TRUE(fc.Pump(kT0));
  gate.AllowAll();
  EXPECT_FALSE(fc.Pump(kT0));
  EXPECT_THAT(out.Take(), ElementsAre("now", "later"));
}

TEST(FlowControllerTest, ARefusedBandHoldsBackEveryBandBelowIt) {
  TestGate gate;
  gate.refused = {10};
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  fc.Enqueue(out.Item("high", "t", 10), kT0);
  fc.Enqueue(out.Item("low", "u", 0), kT0);
  EXPECT_THAT(out.Take(), IsEmpty());  // "low" does not overtake the refused band
  gate.AllowAll();
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("high", "low"));

  // A sheddable band the gate refuses waits; the bands above it go.
  gate.refused = {-1};
  fc.Enqueue(out.Item("shed", "t", -1), kT0);
  fc.Enqueue(out.Item("normal", "t", 0), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("normal"));
  gate.AllowAll();
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("shed"));
}

TEST(FlowControllerTest, ABandHeldOnlyByItsFlowsLimitsHoldsNothingBack) {
  TestGate gate;
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  const FlowLimits one{.max_concurrent = 1};
  fc.Enqueue(out.Item("a1", "a", 10, one), kT0);
  fc.Enqueue(out.Item("a2", "a", 10, one), kT0);
  fc.Enqueue(out.Item("b1", "b", 0), kT0);
  // a2 waits for a's own limit, not for the pool: b1 goes.
  EXPECT_THAT(out.Take(), ElementsAre("a1", "b1"));
  fc.Finished("a", 10, kT0);
  EXPECT_THAT(out.Take(), ElementsAre("a2"));
}

TEST(FlowControllerTest, FairnessBetweenTwoFlowsForEachPolicy) {
  struct Arrival {
    std::string name;
    std::string flow;
    int64_t cost_tokens;
    int enqueued_s;
  };
  const struct {
    FairnessPolicyType fairness;
    std::vector<Arrival> arrivals;
    std::vector<std::string> expected;
  } cases[] = {
      // One queue: FCFS across the flows.
      {FairnessPolicyType::kGlobalStrict,
       {{"a1", "a", 1, 0}, {"b1", "b", 1, 1}, {"a2", "a", 1, 2}, {"b2", "b", 1, 3}},
       {"a1", "b1", "a2", "b2"}},
      // Turns, whatever the order of arrival.
      {FairnessPolicyType::kRoundRobin,
       {{"a1", "a", 1, 0},
        {"a2", "a", 1, 0},
        {"a3", "a", 1, 0},
        {"b1", "b", 1, 1},
        {"b2", "b", 1, 1}},
       {"a1", "b1", "a2", "b2", "a3"}},
      // Least attained service: a's requests cost three times b's.
      {FairnessPolicyType::kProgramAware,
       {{"a1", "a", 300, 0},
        {"a2", "a", 300, 0},
        {"b1", "b", 100, 0},
        {"b2", "b", 100, 0},
        {"b3", "b", 100, 0}},
       {"a1", "b1", "b2", "b3", "a2"}},
  };
  for (const auto& c : cases) {
    FlowControlConfig config;
    config.default_band.fairness = c.fairness;
    TestGate gate;
    gate.RefuseAll();
    Outcomes out;
    FlowController fc(config, &gate);
    for (const Arrival& a : c.arrivals) {
      FlowItem item = out.Item(a.name, a.flow, 0);
      item.cost_tokens = a.cost_tokens;
      fc.Enqueue(std::move(item), kT0 + seconds(a.enqueued_s));
    }
    gate.AllowAll();
    fc.Pump(kT0 + seconds(10));
    EXPECT_EQ(out.Take(), c.expected) << static_cast<int>(c.fairness);
  }
}

TEST(FlowControllerTest, AFlowNeverRunsMoreThanItsMaxConcurrent) {
  TestGate gate;
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  const FlowLimits two{.max_concurrent = 2};
  for (const char* name : {"a1", "a2", "a3"})
    fc.Enqueue(out.Item(name, "a", 0, two), kT0);
  fc.Enqueue(out.Item("a4", "a", 5, two), kT0);  // the limit spans the flow's bands
  EXPECT_THAT(out.Take(), ElementsAre("a1", "a2"));
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Finished("a", 0, kT0);
  EXPECT_THAT(out.Take(), ElementsAre("a4"));
  fc.Finished("a", 0, kT0);
  EXPECT_THAT(out.Take(), ElementsAre("a3"));
  // A Finished the controller cannot match is harmless.
  fc.Finished("nobody", 0, kT0);
  fc.Finished("a", 7, kT0);
  EXPECT_EQ(fc.Snapshot(kT0).dispatched_total, 4u);
}

TEST(FlowControllerTest, EveryCapacityLimitRejectsSaturated) {
  const struct {
    std::string name;
    void (*configure)(FlowControlConfig&);
    FlowLimits limits;
    std::vector<std::tuple<std::string, std::string, int32_t>> items;  // name, flow, priority
    std::vector<std::string> expected;
  } cases[] = {
      {"global maxRequests",
       [](FlowControlConfig& c) { c.max_requests = 2; },
       {},
       {{"a", "f", 0}, {"b", "g", 5}, {"c", "h", 9}},
       {"c:rejected-saturated"}},
      {"global maxBytes",
       [](FlowControlConfig& c) { c.max_bytes = 250; },
       {},
       {{"a", "f", 0}, {"b", "g", 5}, {"c", "h", 9}},
       {"c:rejected-saturated"}},
      {"band maxRequests",
       [](FlowControlConfig& c) { c.priority_bands.push_back({.priority = 0, .max_requests = 2}); },
       {},
       {{"a", "f", 0}, {"b", "g", 0}, {"c", "h", 0}, {"d", "h", 1}},
       {"c:rejected-saturated"}},
      {"band maxBytes",
       [](FlowControlConfig& c) { c.priority_bands.push_back({.priority = 0, .max_bytes = 250}); },
       {},
       {{"a", "f", 0}, {"b", "g", 0}, {"c", "h", 0}, {"d", "h", 1}},
       {"c:rejected-saturated"}},
      {"default band template",
       [](FlowControlConfig& c) { c.default_band.max_requests = 1; },
       {},
       {{"a", "f", 3}, {"b", "g", 3}, {"c", "g", 4}},
       {"b:rejected-saturated"}},
      {"negative band template",
       [](FlowControlConfig& c) {
         c.default_negative_band = PriorityBandConfig{.max_requests = 1};
       },
       {},
       {{"a", "f", -1}, {"b", "g", -1}, {"c", "g", 0}, {"d", "g", 0}},
       {"b:rejected-saturated"}},
      {"flow maxQueued",
       [](FlowControlConfig&) {},
       {.max_queued = 2},
       {{"a", "f", 0}, {"b", "f", 1}, {"c", "f", 2}, {"d", "g", 0}},
       {"c:rejected-saturated"}},
  };
  for (const auto& c : cases) {
    FlowControlConfig config;
    c.configure(config);
    TestGate gate;
    gate.RefuseAll();
    Outcomes out;
    FlowController fc(config, &gate);
    for (const auto& [name, flow, priority] : c.items)
      fc.Enqueue(out.Item(name, flow, priority, c.limits), kT0);
    EXPECT_EQ(out.Take(), c.expected) << c.name;
    EXPECT_EQ(fc.Snapshot(kT0).rejected(DropReason::kSaturated), 1u) << c.name;
    EXPECT_EQ(fc.Snapshot(kT0).queued, static_cast<int64_t>(c.items.size()) - 1) << c.name;
  }
}

FlowControlConfig Ttls(Clock::duration with_endpoints, Clock::duration without) {
  FlowControlConfig config;
  config.default_request_ttl = with_endpoints;
  config.no_endpoint_request_ttl = without;
  return config;
}

TEST(FlowControllerTest, TtlWhileThePoolHasEndpoints) {
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(Ttls(seconds(10), seconds(60)), &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  fc.Enqueue(out.Item("b", "f", 0), kT0 + seconds(5));
  fc.Pump(kT0 + milliseconds(9'999));
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Pump(kT0 + seconds(10));
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-ttl-expired"));
  fc.Pump(kT0 + seconds(15));
  EXPECT_THAT(out.Take(), ElementsAre("b:rejected-ttl-expired"));
  EXPECT_EQ(fc.Snapshot(kT0).rejected(DropReason::kTtlExpired), 2u);
}

TEST(FlowControllerTest, TtlWhileThePoolIsEmpty) {
  TestGate gate;
  gate.RefuseAll();
  gate.has_endpoints = false;
  Outcomes out;
  FlowController fc(Ttls(seconds(10), seconds(30)), &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  fc.Pump(kT0 + seconds(29));
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Pump(kT0 + seconds(30));
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-ttl-expired"));
}

TEST(FlowControllerTest, ARegimeChangeStartsAFreshBudget) {
  // Scale from zero: endpoints appear at 45 s (the pool is still saturated); the queued
  // request gets a fresh 10 s from then.
  TestGate gate;
  gate.RefuseAll();
  gate.has_endpoints = false;
  Outcomes out;
  FlowController fc(Ttls(seconds(10), seconds(60)), &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  gate.has_endpoints = true;
  fc.Pump(kT0 + seconds(45));
  fc.Enqueue(out.Item("b", "f", 0), kT0 + seconds(50));
  fc.Pump(kT0 + milliseconds(54'999));
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Pump(kT0 + seconds(55));
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-ttl-expired"));
  fc.Pump(kT0 + seconds(60));
  EXPECT_THAT(out.Take(), ElementsAre("b:rejected-ttl-expired"));
}

TEST(FlowControllerTest, NoWaitOutlastsTheLongerBudget) {
  // The endpoints vanish 8 s in: a fresh 60 s budget, but no wait past 60 s in all.
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(Ttls(seconds(10), seconds(60)), &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  gate.has_endpoints = false;
  fc.Pump(kT0 + seconds(8));
  fc.Pump(kT0 + seconds(10));
  fc.Pump(kT0 + milliseconds(59'999));
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Pump(kT0 + seconds(60));
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-ttl-expired"));
}

TEST(FlowControllerTest, AZeroTtlMeansNoEvictionInItsRegime) {
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(Ttls(Clock::duration::zero(), seconds(5)), &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  fc.Pump(kT0 + std::chrono::hours(2));  // no bound either: one budget is unlimited
  EXPECT_THAT(out.Take(), IsEmpty());
  gate.has_endpoints = false;
  fc.Pump(kT0 + std::chrono::hours(2));
  fc.Pump(kT0 + std::chrono::hours(2) + milliseconds(4'999));
  EXPECT_THAT(out.Take(), IsEmpty());
  fc.Pump(kT0 + std::chrono::hours(2) + seconds(5));
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-ttl-expired"));
}

TEST(FlowControllerTest, CancelWhileQueuedAndAfterDispatch) {
  TestGate gate;
  gate.refused = {0};
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  const FlowController::Handle queued = fc.Enqueue(out.Item("q", "f", 0), kT0);
  const FlowController::Handle dispatched = fc.Enqueue(out.Item("d", "f", 5), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("d"));
  fc.Cancel(queued);
  EXPECT_THAT(out.Take(), ElementsAre("q:rejected-context-cancelled"));
  fc.Cancel(queued);
  fc.Cancel(dispatched);
  fc.Cancel(12345);
  EXPECT_THAT(out.Take(), IsEmpty());
  const FlowControlSnapshot snapshot = fc.Snapshot(kT0);
  EXPECT_EQ(snapshot.rejected(DropReason::kContextCancelled), 1u);
  EXPECT_EQ(snapshot.queued, 0);
  EXPECT_EQ(snapshot.queued_bytes, 0);
}

TEST(FlowControllerTest, ShutdownRejectsWhatIsQueuedAndWhatComesLater) {
  TestGate gate;
  gate.refused = {0};
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  fc.Enqueue(out.Item("a", "f", 0), kT0);
  fc.Enqueue(out.Item("b", "g", 0), kT0);
  fc.Enqueue(out.Item("running", "f", 5), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("running"));
  fc.Shutdown();
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-shutting-down", "b:rejected-shutting-down"));
  fc.Enqueue(out.Item("late", "f", 5), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("late:rejected-shutting-down"));
  // What runs stays counted until it ends.
  FlowControlSnapshot snapshot = fc.Snapshot(kT0);
  ASSERT_EQ(snapshot.flows.size(), 1u);
  EXPECT_EQ(snapshot.flows[0].in_flight, 1);
  fc.Finished("f", 5, kT0);
  snapshot = fc.Snapshot(kT0);
  EXPECT_THAT(snapshot.flows, IsEmpty());
  EXPECT_EQ(snapshot.rejected(DropReason::kShuttingDown), 3u);
}

TEST(FlowControllerTest, DestructionRejectsWhatIsStillQueued) {
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  {
    FlowController fc(FlowControlConfig{}, &gate);
    fc.Enqueue(out.Item("a", "f", 0), kT0);
  }
  EXPECT_THAT(out.Take(), ElementsAre("a:rejected-shutting-down"));
}

TEST(FlowControllerTest, CallbacksMayCallBackIntoTheController) {
  TestGate gate;
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate);
  const FlowLimits one{.max_concurrent = 1};
  // a's dispatch queues b behind it (same flow, limit 1), reads a snapshot, and ends a: the
  // pump that dispatched a then dispatches b.
  FlowItem a = out.Item("a", "f", 0, one);
  a.dispatch = [&] {
    out.log.push_back("a");
    fc.Enqueue(out.Item("b", "f", 0, one), kT0);
    out.log.push_back("queued " + std::to_string(fc.Snapshot(kT0).queued));
    fc.Finished("f", 0, kT0);
  };
  fc.Enqueue(std::move(a), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("a", "queued 1", "b"));

  // A rejection's callback cancels another queued request and queues a new one.
  FlowControlConfig config;
  config.max_requests = 1;
  gate.RefuseAll();
  FlowController small(config, &gate);
  const FlowController::Handle q = small.Enqueue(out.Item("q", "g", 0), kT0);
  FlowItem x = out.Item("x", "g", 0);
  x.reject = [&](DropReason reason) {
    out.log.push_back("x:" + std::string(DropReasonName(reason)));
    small.Cancel(q);
    small.Enqueue(out.Item("y", "g", 0), kT0);
  };
  small.Enqueue(std::move(x), kT0);
  EXPECT_THAT(out.Take(), ElementsAre("x:rejected-saturated", "q:rejected-context-cancelled"));
  EXPECT_EQ(small.Snapshot(kT0).queued, 1);  // y
}

TEST(FlowControllerTest, OnePumpDispatchesAtMostItsBound) {
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate, {.max_dispatches_per_pump = 2});
  for (const char* name : {"a", "b", "c", "d", "e"})
    fc.Enqueue(out.Item(name, "f", 0), kT0);
  gate.AllowAll();
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("a", "b"));
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("c", "d"));
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("e"));
}

TEST(FlowControllerTest, ReportsEachDispatchsQueueTime) {
  TestGate gate;
  gate.RefuseAll();
  std::vector<std::tuple<std::string, int32_t, double>> dispatched;
  Outcomes out;
  FlowController fc(FlowControlConfig{}, &gate,
                    {.on_dispatched = [&](std::string_view flow, int32_t priority, double s) {
                      dispatched.emplace_back(std::string(flow), priority, s);
                    }});
  fc.Enqueue(out.Item("a", "f", 3), kT0);
  fc.Enqueue(out.Item("b", "g", 0), kT0 + seconds(1));
  gate.AllowAll();
  fc.Pump(kT0 + milliseconds(1'500));
  EXPECT_THAT(dispatched, ElementsAre(std::tuple{"f", 3, 1.5}, std::tuple{"g", 0, 0.5}));
}

TEST(FlowControllerTest, SnapshotShowsQueuesInFlightAndTotals) {
  FlowControlConfig config;
  config.priority_bands.push_back({.priority = 5,
                                   .max_requests = 10,
                                   .max_bytes = 5000,
                                   .fairness = FairnessPolicyType::kRoundRobin,
                                   .ordering = OrderingPolicyType::kEdf});
  TestGate gate;
  gate.refused = {0};
  Outcomes out;
  FlowController fc(config, &gate);
  const FlowLimits one{.max_concurrent = 1};
  fc.Enqueue(out.Item("a1", "a", 5, one), kT0);
  fc.Enqueue(out.Item("a2", "a", 5, one), kT0 + seconds(1));
  fc.Enqueue(out.Item("a3", "a", 5, one), kT0 + seconds(2));
  fc.Enqueue(out.Item("b1", "b", 0), kT0 + seconds(3));
  fc.Enqueue(out.Item("a4", "a", 0, one), kT0 + seconds(4));
  EXPECT_THAT(out.Take(), ElementsAre("a1"));
  const FlowControlSnapshot s = fc.Snapshot(kT0 + seconds(10));
  EXPECT_EQ(s.queued, 4);
  EXPECT_EQ(s.queued_bytes, 400);
  EXPECT_EQ(s.dispatched_total, 1u);
  ASSERT_EQ(s.bands.size(), 2u);
  EXPECT_EQ(s.bands[0].priority, 5);
  EXPECT_EQ(s.bands[0].queued, 2);
  EXPECT_EQ(s.bands[0].queued_bytes, 200);
  EXPECT_EQ(s.bands[0].in_flight, 1);
  EXPECT_EQ(s.bands[0].max_requests, 10);
  EXPECT_EQ(s.bands[0].fairness_policy, "round-robin-fairness-policy");
  EXPECT_EQ(s.bands[0].ordering_policy, "edf-ordering-policy");
  EXPECT_EQ(s.bands[1].priority, 0);
  EXPECT_EQ(s.bands[1].queued, 2);
  EXPECT_EQ(s.bands[1].max_requests, 5000);
  EXPECT_EQ(s.bands[1].fairness_policy, "global-strict-fairness-policy");
  ASSERT_EQ(s.flows.size(), 3u);
  EXPECT_EQ(s.flows[0].flow_id, "a");
  EXPECT_EQ(s.flows[0].priority, 5);
  EXPECT_EQ(s.flows[0].queued, 2);
  EXPECT_EQ(s.flows[0].queued_bytes, 200);
  EXPECT_EQ(s.flows[0].in_flight, 1);
  EXPECT_DOUBLE_EQ(s.flows[0].oldest_wait_seconds, 9);
  EXPECT_EQ(s.flows[1].flow_id, "a");
  EXPECT_EQ(s.flows[1].priority, 0);
  EXPECT_EQ(s.flows[1].in_flight, 0);
  EXPECT_DOUBLE_EQ(s.flows[1].oldest_wait_seconds, 6);
  EXPECT_EQ(s.flows[2].flow_id, "b");
  EXPECT_DOUBLE_EQ(s.flows[2].oldest_wait_seconds, 7);
}

TEST(FlowControllerTest, SloDeadlinesOrderABandThatAsksForThem) {
  FlowControlConfig config;
  config.default_band.ordering = OrderingPolicyType::kSloDeadline;
  TestGate gate;
  gate.RefuseAll();
  Outcomes out;
  FlowController fc(config, &gate);
  FlowItem none = out.Item("none", "f", 0);
  FlowItem late = out.Item("late", "f", 0);
  late.slo_deadline = kT0 + seconds(9);
  FlowItem soon = out.Item("soon", "f", 0);
  soon.slo_deadline = kT0 + seconds(2);
  fc.Enqueue(std::move(none), kT0);
  fc.Enqueue(std::move(late), kT0);
  fc.Enqueue(std::move(soon), kT0);
  gate.AllowAll();
  fc.Pump(kT0);
  EXPECT_THAT(out.Take(), ElementsAre("soon", "late", "none"));
}

}  // namespace
}  // namespace switchyard::router::flow
