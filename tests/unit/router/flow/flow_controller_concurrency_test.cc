// The flow controller called from many threads at once (enqueues, cancels, pumps, finishes,
// a shutdown), for TSan: every item still gets exactly one callback and no flow runs more
// than its max concurrent. Callbacks finish some requests inline, re-entering the controller.
#include <atomic>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "base/mutex.h"
#include "flow_test_util.h"
#include "router/flow/flow_controller.h"

namespace switchyard::router::flow {
namespace {

constexpr int kFlows = 4;
constexpr int64_t kMaxConcurrent = 3;

class AtomicGate : public DispatchGate {
 public:
  bool MayDispatch(int32_t, Clock::time_point) override { return allow.load(); }
  bool HasEndpoints() override { return true; }
  std::atomic<bool> allow{true};
};

// The shared state of one run: each item's callbacks, each flow's requests in flight, and the
// dispatched requests waiting for a finisher.
class Harness {
 public:
  explicit Harness(int items) : dispatched_(items), rejected_(items) {}

  Clock::time_point Now() { return kT0 + std::chrono::milliseconds(clock_ms_.fetch_add(1)); }

  FlowItem Item(FlowController& fc, int id) {
    FlowItem item;
    item.flow_id = "f" + std::to_string(id % kFlows);
    item.priority = id % 3 - 1;
    item.bytes = 100;
    item.cost_tokens = 50;
    item.limits.max_concurrent = kMaxConcurrent;
    item.dispatch = [this, &fc, id, flow = item.flow_id, priority = item.priority] {
      dispatched_[id].fetch_add(1);
      EXPECT_LT(in_flight_[id % kFlows].fetch_add(1), kMaxConcurrent) << flow;
      if (id % 5 == 0) {  // finish inline: a callback re-entering the controller
        in_flight_[id % kFlows].fetch_sub(1);
        fc.Finished(flow, priority, Now());
        return;
      }
      base::MutexLock lock(&mu_);
      to_finish_.emplace_back(flow, priority);
    };
    item.reject = [this, id](DropReason) { rejected_[id].fetch_add(1); };
    return item;
  }

  // Finishes one dispatched request; false when none is waiting.
  bool FinishOne(FlowController& fc) {
    std::pair<std::string, int32_t> done;
    {
      base::MutexLock lock(&mu_);
      if (to_finish_.empty())
        return false;
      done = std::move(to_finish_.front());
      to_finish_.pop_front();
    }
    const int flow = done.first.back() - '0';
    in_flight_[flow].fetch_sub(1);
    fc.Finished(done.first, done.second, Now());
    return true;
  }

  bool AllCalledBack() const {
    for (size_t id = 0; id < dispatched_.size(); ++id) {
      if (dispatched_[id].load() + rejected_[id].load() == 0)
        return false;
    }
    return true;
  }

  void ExpectExactlyOneCallbackEach() const {
    for (size_t id = 0; id < dispatched_.size(); ++id)
      EXPECT_EQ(dispatched_[id].load() + rejected_[id].load(), 1) << "item " << id;
  }

 private:
  std::atomic<int64_t> clock_ms_{0};
  std::vector<std::atomic<int>> dispatched_;
  std::vector<std::atomic<int>> rejected_;
  std::atomic<int64_t> in_flight_[kFlows] = {};
  base::Mutex mu_;
  std::deque<std::pair<std::string, int32_t>> to_finish_ ABSL_GUARDED_BY(mu_);
};

// Runs `enqueuers` threads of `per_thread` items each against a pumping thread (which also
// flips the gate) and a finishing thread; the enqueuer of item `shutdown_at` (if >= 0) shuts
// the controller down right after enqueuing it. Then finishes and pumps on this thread until
// every item was called back.
void RunTraffic(int enqueuers, int per_thread, int shutdown_at) {
  FlowControlConfig config;
  config.max_requests = 400;
  config.default_request_ttl = std::chrono::milliseconds(300);
  config.priority_bands.push_back({.priority = 1, .fairness = FairnessPolicyType::kRoundRobin});
  config.priority_bands.push_back({.priority = 0, .fairness = FairnessPolicyType::kProgramAware});
  AtomicGate gate;
  Harness harness(enqueuers * per_thread);
  FlowController fc(config, &gate, {.max_dispatches_per_pump = 8});

  std::atomic<int> enqueuers_left{enqueuers};
  std::vector<std::thread> threads;
  for (int t = 0; t < enqueuers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const int id = t * per_thread + i;
        const FlowController::Handle handle = fc.Enqueue(harness.Item(fc, id), harness.Now());
        if (id % 7 == 0)
          fc.Cancel(handle);  // queued, or already dispatched or rejected: either is fine
        if (id == shutdown_at)
          fc.Shutdown();
      }
      enqueuers_left.fetch_sub(1);
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; enqueuers_left.load() > 0; ++i) {
      gate.allow.store(i % 50 != 0);
      fc.Pump(harness.Now());
      (void)fc.Snapshot(harness.Now());
    }
    gate.allow.store(true);
  });
  threads.emplace_back([&] {
    while (enqueuers_left.load() > 0)
      harness.FinishOne(fc);
  });
  for (std::thread& thread : threads)
    thread.join();

  for (int round = 0; round < 1'000'000 && !harness.AllCalledBack(); ++round) {
    while (harness.FinishOne(fc)) {
    }
    fc.Pump(harness.Now());
  }
  harness.ExpectExactlyOneCallbackEach();
  while (harness.FinishOne(fc)) {
  }
  const FlowControlSnapshot snapshot = fc.Snapshot(harness.Now());
  EXPECT_EQ(snapshot.queued, 0);
  for (const FlowControlSnapshot::Band& band : snapshot.bands)
    EXPECT_EQ(band.in_flight, 0) << band.priority;
}

TEST(FlowControllerConcurrencyTest, ThreadsEnqueueCancelPumpAndFinishAtOnce) {
  RunTraffic(/*enqueuers=*/3, /*per_thread=*/3000, /*shutdown_at=*/-1);
}

TEST(FlowControllerConcurrencyTest, AShutdownAmidTheTraffic) {
  RunTraffic(/*enqueuers=*/3, /*per_thread=*/2000, /*shutdown_at=*/1000);
}

}  // namespace
}  // namespace switchyard::router::flow
