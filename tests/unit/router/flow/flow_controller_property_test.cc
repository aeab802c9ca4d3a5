// The flow controller under thousands of random operations (arrivals, cancels, finishes,
// pumps, gate flips, clock steps; fixed seed) against a model of what it promises: every item
// gets exactly one callback, none is dispatched twice, no flow runs more than its max
// concurrent, a dispatch never jumps a higher band that could have gone (nor one the gate
// refused), and no request waits past the longer TTL budget.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "flow_test_util.h"
#include "router/flow/flow_controller.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::milliseconds;

// A gate that refuses some bands (any of them, so that a refused band may sit above an allowed
// one), bands below a threshold (sheddable ones first, as a saturation detector would) and any
// dispatch past a capacity of requests in flight.
class CapacityGate : public DispatchGate {
 public:
  explicit CapacityGate(const int64_t* in_flight) : in_flight_(in_flight) {}
  bool MayDispatch(int32_t priority, Clock::time_point) override { return Allows(priority); }
  bool HasEndpoints() override { return has_endpoints; }
  bool Allows(int32_t priority) const {
    return priority >= min_priority && !refused.contains(priority) && *in_flight_ < capacity;
  }

  int32_t min_priority = std::numeric_limits<int32_t>::min();
  std::set<int32_t> refused;
  int64_t capacity = 4;
  bool has_endpoints = true;

 private:
  const int64_t* in_flight_;
};

enum class State { kQueued, kDispatched, kFinished, kRejected };

struct Model {
  struct Item {
    std::string flow;
    int32_t priority = 0;
    Clock::time_point enqueued;
    State state = State::kQueued;
    int callbacks = 0;
    FlowController::Handle handle = 0;
    bool cancelled = false;  // the test cancelled it
  };
  std::vector<Item> items;
  std::map<std::string, FlowLimits> limits;
  std::map<std::string, int64_t> in_flight;
  int64_t total_in_flight = 0;
  std::vector<size_t> running;
  std::optional<size_t> enqueuing;  // the item whose Enqueue is in progress
  std::map<DropReason, uint64_t> rejected;
  uint64_t dispatched = 0;
  bool shutting_down = false;

  bool UnderLimit(const std::string& flow) const {
    const int64_t max = limits.at(flow).max_concurrent;
    return max == 0 || in_flight.at(flow) < max;
  }
};

TEST(FlowControllerPropertyTest, RandomOperationsKeepEveryPromise) {
  Model model;
  model.limits = {{"f0", {.max_concurrent = 1, .max_queued = 3}},
                  {"f1", {.max_concurrent = 2, .max_queued = 0}},
                  {"f2", {.max_concurrent = 0, .max_queued = 2}},
                  {"f3", {.max_concurrent = 3, .max_queued = 6}}};
  const std::map<std::string, double> weights = {{"f0", 1}, {"f1", 2}, {"f2", 0.5}, {"f3", 1}};
  for (const auto& [flow, limits] : model.limits)
    model.in_flight[flow] = 0;
  const std::vector<int32_t> priorities = {5, 2, 0, -1};

  CapacityGate gate(&model.total_in_flight);
  FlowControlConfig config;
  config.max_requests = 30;
  config.max_bytes = 4000;
  config.default_request_ttl = milliseconds(200);
  config.no_endpoint_request_ttl = milliseconds(500);
  config.priority_bands.push_back({.priority = 5,
                                   .max_requests = 8,
                                   .fairness = FairnessPolicyType::kRoundRobin,
                                   .ordering = OrderingPolicyType::kSloDeadline});
  config.priority_bands.push_back({.priority = 0,
                                   .max_requests = 12,
                                   .fairness = FairnessPolicyType::kProgramAware,
                                   .ordering = OrderingPolicyType::kEdf});
  config.default_negative_band = PriorityBandConfig{.max_requests = 4, .max_bytes = 500};
  FlowController fc(config, &gate, {.max_dispatches_per_pump = 3});

  std::mt19937_64 rng(0x5eed'f10c);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Clock::time_point now = kT0;

  auto make_item = [&](size_t id) {
    const Model::Item& m = model.items[id];
    FlowItem item;
    item.flow_id = m.flow;
    item.priority = m.priority;
    item.bytes = uniform(1, 300);
    item.cost_tokens = uniform(1, 2000);
    item.received = now - milliseconds(uniform(0, 50));
    if (uniform(0, 1) == 1)
      item.slo_deadline = item.received + milliseconds(uniform(10, 400));
    item.limits = model.limits.at(m.flow);
    item.weight = weights.at(m.flow);
    item.dispatch = [&model, &gate, id] {
      Model::Item& s = model.items[id];
      ASSERT_EQ(s.callbacks, 0) << "item " << id << " called back twice";
      ++s.callbacks;
      ASSERT_EQ(s.state, State::kQueued);
      EXPECT_TRUE(model.UnderLimit(s.flow)) << "item " << id << " over its flow's limit";
      EXPECT_TRUE(gate.Allows(s.priority)) << "item " << id << " dispatched past the gate";
      for (size_t other = 0; other < model.items.size(); ++other) {
        const Model::Item& q = model.items[other];
        // A higher band that could go would have; one the gate refused stops the pump.
        if (q.state == State::kQueued && q.priority > s.priority && model.UnderLimit(q.flow)) {
          ADD_FAILURE() << "item " << id << " (priority " << s.priority << ") went before item "
                        << other << " (priority " << q.priority << "), which the gate "
                        << (gate.Allows(q.priority) ? "allowed" : "refused");
        }
      }
      s.state = State::kDispatched;
      ++model.in_flight[s.flow];
      ++model.total_in_flight;
      ++model.dispatched;
      model.running.push_back(id);
    };
    item.reject = [&model, &now, &config, id](DropReason reason) {
      Model::Item& s = model.items[id];
      ASSERT_EQ(s.callbacks, 0) << "item " << id << " called back twice";
      ++s.callbacks;
      ASSERT_EQ(s.state, State::kQueued);
      s.state = State::kRejected;
      ++model.rejected[reason];
      switch (reason) {
        case DropReason::kSaturated:
          EXPECT_EQ(model.enqueuing, id) << "rejected-saturated after its Enqueue";
          break;
        case DropReason::kTtlExpired:
          EXPECT_GE(now - s.enqueued, config.default_request_ttl) << "item " << id;
          break;
        case DropReason::kContextCancelled:
          EXPECT_TRUE(s.cancelled) << "item " << id;
          break;
        case DropReason::kShuttingDown:
          EXPECT_TRUE(model.shutting_down) << "item " << id;
          break;
      }
    };
    return item;
  };

  for (int step = 0; step < 20'000; ++step) {
    const int64_t op = uniform(0, 99);
    if (op < 35) {
      const size_t id = model.items.size();
      model.items.push_back({.flow = "f" + std::to_string(uniform(0, 3)),
                             .priority = priorities[uniform(0, 3)],
                             .enqueued = now});
      model.enqueuing = id;
      model.items[id].handle = fc.Enqueue(make_item(id), now);
      model.enqueuing.reset();
    } else if (op < 45) {
      if (model.items.empty())
        continue;
      Model::Item& victim = model.items[uniform(0, model.items.size() - 1)];
      const bool was_queued = victim.state == State::kQueued;
      victim.cancelled = true;
      fc.Cancel(victim.handle);
      if (was_queued) {
        EXPECT_EQ(victim.state, State::kRejected);
      }
    } else if (op < 65) {
      if (model.running.empty())
        continue;
      const size_t at = uniform(0, model.running.size() - 1);
      const size_t id = model.running[at];
      model.running.erase(model.running.begin() + at);
      Model::Item& s = model.items[id];
      s.state = State::kFinished;
      --model.in_flight[s.flow];
      --model.total_in_flight;
      fc.Finished(s.flow, s.priority, now);
    } else if (op < 80) {
      fc.Pump(now);
      // No request outwaits the longer budget.
      for (const Model::Item& s : model.items) {
        if (s.state == State::kQueued) {
          EXPECT_LT(now - s.enqueued, config.no_endpoint_request_ttl);
        }
      }
    } else if (op < 88) {
      const int32_t thresholds[] = {std::numeric_limits<int32_t>::min(), 0, 3, 6};
      gate.min_priority = thresholds[uniform(0, 3)];
      gate.refused.clear();
      for (const int32_t priority : priorities) {
        if (uniform(0, 3) == 0)
          gate.refused.insert(priority);
      }
      gate.capacity = uniform(2, 12);
      gate.has_endpoints = uniform(0, 9) != 0;
    } else {
      now += milliseconds(uniform(0, 60));
    }
    if (HasFatalFailure())
      return;
  }

  // What the controller counted is what the model saw.
  FlowControlSnapshot snapshot = fc.Snapshot(now);
  EXPECT_EQ(snapshot.dispatched_total, model.dispatched);
  for (const DropReason reason :
       {DropReason::kSaturated, DropReason::kTtlExpired, DropReason::kContextCancelled}) {
    EXPECT_EQ(snapshot.rejected(reason), model.rejected[reason]) << DropReasonName(reason);
  }
  const auto queued = std::count_if(model.items.begin(), model.items.end(),
                                    [](const Model::Item& s) { return s.state == State::kQueued; });
  EXPECT_EQ(snapshot.queued, queued);
  // Each outcome happened (the run exercised them all).
  EXPECT_GT(model.dispatched, 1000u);
  for (const DropReason reason :
       {DropReason::kSaturated, DropReason::kTtlExpired, DropReason::kContextCancelled}) {
    EXPECT_GT(model.rejected[reason], 10u) << DropReasonName(reason);
  }

  // Shutdown ends every wait; then every item has had exactly one callback.
  model.shutting_down = true;
  fc.Shutdown();
  EXPECT_EQ(model.rejected[DropReason::kShuttingDown], static_cast<uint64_t>(queued));
  EXPECT_EQ(fc.Snapshot(now).rejected(DropReason::kShuttingDown), static_cast<uint64_t>(queued));
  for (size_t id = 0; id < model.items.size(); ++id)
    EXPECT_EQ(model.items[id].callbacks, 1) << "item " << id;
}

}  // namespace
}  // namespace switchyard::router::flow
