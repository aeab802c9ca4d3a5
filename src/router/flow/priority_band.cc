#include "router/flow/priority_band.h"

#include <iterator>

namespace switchyard::router::flow {

PriorityBand::PriorityBand(const PriorityBandConfig& config)
    : config_(config),
      ordering_(MakeOrderingPolicy(config.ordering)),
      fairness_(MakeFairnessPolicy(config.fairness)) {}

bool PriorityBand::Fits(int64_t bytes) const {
  return queued_ + 1 <= config_.max_requests && queued_bytes_ + bytes <= config_.max_bytes;
}

void PriorityBand::Add(QueuedItem* item) {
  auto flow = flows_.find(item->request.flow_id);
  if (flow == flows_.end())
    flow = flows_.try_emplace(item->request.flow_id, ordering_.get()).first;
  flow->second.items.insert(item);
  flow->second.bytes += item->request.bytes;
  ++queued_;
  queued_bytes_ += item->request.bytes;
}

void PriorityBand::Remove(QueuedItem* item) {
  const auto flow = flows_.find(item->request.flow_id);
  flow->second.items.erase(item);
  flow->second.bytes -= item->request.bytes;
  --queued_;
  queued_bytes_ -= item->request.bytes;
  EraseIfIdle(flow);
}

QueuedItem* PriorityBand::TakeNext(std::span<const FlowCandidate> candidates,
                                   Clock::time_point now) {
  const FlowCandidate& pick = candidates[fairness_->Pick(candidates, *ordering_, now)];
  fairness_->Dispatched(pick, now);
  FlowQueue& flow = flows_.find(pick.flow_id)->second;
  QueuedItem* item = *flow.items.begin();
  // Counted in flight before Remove, so that the flow's queue stays while it runs.
  ++flow.in_flight;
  ++in_flight_;
  Remove(item);
  return item;
}

bool PriorityBand::Finished(std::string_view flow_id) {
  const auto flow = flows_.find(flow_id);
  if (flow == flows_.end() || flow->second.in_flight == 0)
    return false;
  --flow->second.in_flight;
  --in_flight_;
  EraseIfIdle(flow);
  return true;
}

void PriorityBand::Clear() {
  for (auto it = flows_.begin(); it != flows_.end();) {
    auto next = std::next(it);
    it->second.items.clear();
    it->second.bytes = 0;
    EraseIfIdle(it);
    it = next;
  }
  queued_ = 0;
  queued_bytes_ = 0;
}

void PriorityBand::EraseIfIdle(std::map<std::string, FlowQueue, std::less<>>::iterator flow) {
  if (flow->second.items.empty() && flow->second.in_flight == 0)
    flows_.erase(flow);
}

}  // namespace switchyard::router::flow
