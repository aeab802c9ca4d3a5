// FlowItem: one request as the flow controller queues it (flow_controller.h), and QueuedItem,
// the item with what the controller adds when it takes it, as the policies see it.
//
// A flow is a tenant's fairness id: the flow controller queues per (flow id, priority), and a
// flow's limits hold across the bands it has requests in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"

#include "router/flow/drop_reason.h"

namespace switchyard::router::flow {

using Clock = std::chrono::steady_clock;

// A flow's limits (0: none). Each item carries its flow's; the latest enqueued item's apply.
struct FlowLimits {
  int64_t max_concurrent = 0;  // dispatched and not yet Finished
  int64_t max_queued = 0;      // waiting in the controller
};

struct FlowItem {
  std::string flow_id;
  int32_t priority = 0;  // the band; higher first, negative = sheddable
  int64_t bytes = 0;     // the request body's size, counted against maxBytes
  // Prompt tokens plus max tokens: what program-aware fairness charges the flow.
  int64_t cost_tokens = 0;
  Clock::time_point received;
  // received + x-llm-d-slo-ttft-ms, when the request has one (slo-deadline-ordering-policy).
  std::optional<Clock::time_point> slo_deadline;
  FlowLimits limits;
  double weight = 1;  // the flow's fairness weight; not > 0 counts as 1
  // Exactly one of these runs, exactly once, with no lock of the controller held, on whichever
  // thread made the call that ended the wait (Enqueue, Pump, Finished, Cancel, Shutdown). Keep
  // them short: a dispatch posts the request's work elsewhere. They may call the controller.
  absl::AnyInvocable<void()> dispatch;
  absl::AnyInvocable<void(DropReason)> reject;
};

struct QueuedItem {
  FlowItem request;
  uint64_t seq = 0;  // order of arrival; also the item's handle
  Clock::time_point enqueued;
  // The TTL budget in force when it was enqueued (zero: none); edf-ordering-policy's deadline.
  Clock::duration ttl{0};
};

}  // namespace switchyard::router::flow
