// FlowController: the router's flow control, as llm-d's: requests wait in queues per (flow id,
// priority) and leave them in three tiers of order: strict priority across bands (the
// highest first; a band the dispatch gate refuses stops every band below it), a fairness
// policy between the flows of a band, then an ordering policy inside a flow. Capacity limits
// (global, per band, a flow's max queued) shed at once; a TTL budget sheds a request that
// waited too long; a flow's max concurrent holds back its requests while that many run.
//
// TTL, as llm-d's defaultRequestTTL and noEndpointRequestTTL: the budget of the regime in
// force (whether the gate sees endpoints, noticed at each Enqueue and Pump) counts from the
// later of the request's enqueue and the last regime change; "0s" means no eviction in that
// regime; and when both budgets are set, no request waits longer than the longer of the two.
//
// Callbacks: each item's dispatch or reject runs exactly once, on the thread of the call that
// decided it, with no lock of the controller held, so it may call back into the controller.
// One Pump runs at a time: a Pump (or the Pump inside Enqueue or Finished) that finds another
// in progress returns at once, and the one in progress sees what changed, up to its bound.
//
// Threads: any; one mutex. The gate is called with it held (dispatch_gate.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "router/flow/dispatch_gate.h"
#include "router/flow/drop_reason.h"
#include "router/flow/flow_control_config.h"
#include "router/flow/flow_item.h"
#include "router/flow/priority_band.h"

namespace switchyard::router::flow {

struct FlowControllerOptions {
  // At most this many dispatches per Pump call, so that one call's work stays bounded (the
  // router pumps from a timer and after each metrics scrape). >= 1.
  int max_dispatches_per_pump = 64;
  // Each dispatch's time in the queue; runs right after its dispatch callback, on the same
  // thread and likewise with no lock held. Optional.
  std::function<void(std::string_view flow_id, int32_t priority, double queue_seconds)>
      on_dispatched = nullptr;
  // Enqueue's request (or an older one) still waits once Enqueue has pumped: whoever pumps
  // on a timer should tick (the router's pump sleeps while nothing waits). Runs on
  // Enqueue's thread with no lock held. Optional.
  std::function<void()> on_waiting = nullptr;
};

// A view of the controller for /debug/flows and the router's metrics.
struct FlowControlSnapshot {
  struct Flow {  // one (flow id, priority) with queued or in-flight requests
    std::string flow_id;
    int32_t priority = 0;
    int64_t queued = 0;
    int64_t queued_bytes = 0;
    int64_t in_flight = 0;
    double oldest_wait_seconds = 0;  // its longest-waiting queued request's; 0 when none
  };
  struct Band {
    int32_t priority = 0;
    int64_t queued = 0;
    int64_t queued_bytes = 0;
    int64_t in_flight = 0;
    int64_t max_requests = 0;
    int64_t max_bytes = 0;
    std::string fairness_policy;
    std::string ordering_policy;
  };
  std::vector<Band> bands;  // highest priority first
  std::vector<Flow> flows;  // by priority (highest first), then flow id
  int64_t queued = 0;
  int64_t queued_bytes = 0;
  // Since construction.
  uint64_t dispatched_total = 0;
  std::array<uint64_t, kDropReasonCount> rejected_total{};  // by DropReason

  uint64_t rejected(DropReason reason) const { return rejected_total[static_cast<size_t>(reason)]; }
};

class FlowController {
 public:
  using Handle = uint64_t;

  // `gate` outlives the controller.
  FlowController(const FlowControlConfig& config, DispatchGate* gate,
                 FlowControllerOptions options = {});
  // Rejects what is still queued with rejected-shutting-down.
  ~FlowController();
  FlowController(const FlowController&) = delete;
  FlowController& operator=(const FlowController&) = delete;

  // Queues `item`, or rejects it at once: rejected-saturated when it does not fit the global,
  // band or flow limits, rejected-shutting-down after Shutdown. Then pumps. The handle is for
  // Cancel. REQUIRES: both callbacks set.
  Handle Enqueue(FlowItem item, Clock::time_point now);
  // The client went away: a queued item leaves at once with rejected-context-cancelled. A
  // no-op for an item no longer queued (dispatched, rejected, cancelled).
  void Cancel(Handle handle);
  // A dispatched request of (`flow_id`, `priority`) ended: the flow's in-flight count drops
  // (a no-op when it has none in flight at that priority). Then pumps.
  void Finished(std::string_view flow_id, int32_t priority, Clock::time_point now);
  // Rejects the requests whose TTL budget ran out (rejected-ttl-expired), then dispatches
  // while it may, at most max_dispatches_per_pump. Returns whether requests still wait
  // (true, too, when another thread was pumping: it may leave some).
  bool Pump(Clock::time_point now);
  // Rejects everything queued, and every later Enqueue, with rejected-shutting-down. Requests
  // in flight stay counted until Finished.
  void Shutdown();

  FlowControlSnapshot Snapshot(Clock::time_point now) const;

 private:
  // A flow's state across the bands.
  struct FlowState {
    FlowLimits limits;
    double weight = 1;
    int64_t queued = 0;
    int64_t in_flight = 0;
  };
  // TTL order: oldest enqueued first.
  struct ByAge {
    bool operator()(const QueuedItem* a, const QueuedItem* b) const {
      return a->enqueued != b->enqueued ? a->enqueued < b->enqueued : a->seq < b->seq;
    }
  };
  using Owned = std::unique_ptr<QueuedItem>;

  void ObserveRegimeLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Clock::duration TtlInForceLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PriorityBand& BandLocked(int32_t priority) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FitsLocked(const FlowItem& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `item`, already out of its band, out of the controller's indexes; it is the
  // caller's.
  Owned ForgetLocked(QueuedItem* item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(Clock::time_point now, std::vector<Owned>* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next item to dispatch, out of its queue and counted in flight; null when none may go.
  Owned TakeNextLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseFlowIfIdleLocked(std::map<std::string, FlowState, std::less<>>::iterator flow)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Everything queued, out of the controller (shutdown).
  std::vector<Owned> TakeAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Reject(std::vector<Owned>& items, DropReason reason);
  void Dispatch(QueuedItem& item, Clock::time_point now) const;

  const FlowControlConfig config_;
  DispatchGate* const gate_;
  const FlowControllerOptions options_;

  mutable base::Mutex mu_;
  std::map<int32_t, std::unique_ptr<PriorityBand>, std::greater<>> bands_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<Handle, Owned> queued_items_ ABSL_GUARDED_BY(mu_);
  std::set<QueuedItem*, ByAge> by_age_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, FlowState, std::less<>> flows_ ABSL_GUARDED_BY(mu_);
  std::vector<FlowCandidate> candidates_ ABSL_GUARDED_BY(mu_);  // TakeNextLocked's, reused
  Handle next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The TTL regime: whether the gate last saw endpoints, and since when.
  bool has_endpoints_ ABSL_GUARDED_BY(mu_) = true;
  Clock::time_point regime_since_ ABSL_GUARDED_BY(mu_) = Clock::time_point::min();
  bool pumping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dispatched_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, kDropReasonCount> rejected_total_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace switchyard::router::flow
