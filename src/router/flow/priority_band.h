// PriorityBand: one priority level inside the flow controller: a queue per flow, ordered by
// the band's ordering policy; the band's fairness policy, which picks between its flows; its
// limits and totals. The items belong to the controller; the band holds pointers.
//
// Not thread-safe: the flow controller's lock guards every band.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "router/flow/fairness_policy.h"
#include "router/flow/flow_control_config.h"
#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

class PriorityBand {
 public:
  // One flow's requests in this band.
  struct FlowQueue {
    explicit FlowQueue(const OrderingPolicy* ordering) : items(ByOrdering{ordering}) {}
    struct ByOrdering {
      const OrderingPolicy* ordering;
      bool operator()(const QueuedItem* a, const QueuedItem* b) const {
        return ordering->Before(*a, *b);
      }
    };
    std::set<QueuedItem*, ByOrdering> items;  // first: the next to go
    int64_t bytes = 0;
    int64_t in_flight = 0;  // dispatched and not yet finished
  };

  explicit PriorityBand(const PriorityBandConfig& config);
  PriorityBand(const PriorityBand&) = delete;
  PriorityBand& operator=(const PriorityBand&) = delete;

  const PriorityBandConfig& config() const { return config_; }
  int32_t priority() const { return config_.priority; }
  std::string_view fairness_type() const { return fairness_->type(); }
  std::string_view ordering_type() const { return ordering_->type(); }
  int64_t queued() const { return queued_; }
  int64_t queued_bytes() const { return queued_bytes_; }
  int64_t in_flight() const { return in_flight_; }
  // Flows with queued or in-flight requests, by id.
  const std::map<std::string, FlowQueue, std::less<>>& flows() const { return flows_; }

  // Whether one more request of `bytes` stays within the band's limits.
  bool Fits(int64_t bytes) const;
  void Add(QueuedItem* item);
  // REQUIRES: `item` is queued here.
  void Remove(QueuedItem* item);

  // Takes the fairness policy's pick among `candidates` (flows of this band that may dispatch
  // now, by id, each with the first of its queue as head): the item leaves its queue and
  // counts as in flight. REQUIRES: `candidates` non-empty.
  QueuedItem* TakeNext(std::span<const FlowCandidate> candidates, Clock::time_point now);
  // A request of `flow_id` dispatched from this band ended. Returns false (and changes
  // nothing) when the flow has none in flight here.
  bool Finished(std::string_view flow_id);
  // Empties every queue (the items are the caller's); in-flight counts stay.
  void Clear();

 private:
  void EraseIfIdle(std::map<std::string, FlowQueue, std::less<>>::iterator flow);

  const PriorityBandConfig config_;
  const std::unique_ptr<OrderingPolicy> ordering_;
  const std::unique_ptr<FairnessPolicy> fairness_;
  std::map<std::string, FlowQueue, std::less<>> flows_;
  int64_t queued_ = 0;
  int64_t queued_bytes_ = 0;
  int64_t in_flight_ = 0;
};

}  // namespace switchyard::router::flow
