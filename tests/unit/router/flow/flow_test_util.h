// What the flow controller's tests share: a dispatch gate the test steers and items that log
// their outcome. Single-threaded use.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "router/flow/dispatch_gate.h"
#include "router/flow/flow_item.h"

namespace switchyard::router::flow {

inline const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

class TestGate : public DispatchGate {
 public:
  bool MayDispatch(int32_t priority, Clock::time_point) override {
    return priority >= min_priority && !refused.contains(priority);
  }
  bool HasEndpoints() override { return has_endpoints; }

  void RefuseAll() { min_priority = std::numeric_limits<int32_t>::max(); }
  void AllowAll() {
    min_priority = std::numeric_limits<int32_t>::min();
    refused.clear();
  }

  int32_t min_priority = std::numeric_limits<int32_t>::min();
  std::set<int32_t> refused;
  bool has_endpoints = true;
};

// Items whose callbacks append "name" (dispatched) or "name:reason" (rejected) to `log`.
class Outcomes {
 public:
  FlowItem Item(const std::string& name, const std::string& flow, int32_t priority,
                FlowLimits limits = {}) {
    FlowItem item;
    item.flow_id = flow;
    item.priority = priority;
    item.bytes = 100;
    item.cost_tokens = 10;
    item.received = kT0;
    item.limits = limits;
    item.dispatch = [this, name] { log.push_back(name); };
    item.reject = [this, name](DropReason reason) {
      log.push_back(name + ":" + std::string(DropReasonName(reason)));
    };
    return item;
  }
  // The log so far, emptied.
  std::vector<std::string> Take() { return std::exchange(log, {}); }

  std::vector<std::string> log;
};

}  // namespace switchyard::router::flow
