#include "router/flow/flow_controller.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace switchyard::router::flow {

FlowController::FlowController(const FlowControlConfig& config, DispatchGate* gate,
                               FlowControllerOptions options)
    : config_(config), gate_(gate), options_(std::move(options)) {
  base::MutexLock lock(&mu_);
  for (const PriorityBandConfig& band : config_.priority_bands)
    BandLocked(band.priority);
}

FlowController::~FlowController() {
  Shutdown();
}

FlowController::Handle FlowController::Enqueue(FlowItem item, Clock::time_point now) {
  std::optional<DropReason> refused;
  absl::AnyInvocable<void(DropReason)> reject;  // a refused item's
  Handle handle = 0;
  {
    base::MutexLock lock(&mu_);
    handle = next_seq_++;
    ObserveRegimeLocked(now);
    item.bytes = std::max<int64_t>(0, item.bytes);
    if (!(item.weight > 0))
      item.weight = 1;
    if (shutting_down_) {
      refused = DropReason::kShuttingDown;
    } else if (!FitsLocked(item)) {
      refused = DropReason::kSaturated;
    }
    if (refused.has_value()) {
      ++rejected_total_[static_cast<size_t>(*refused)];
      reject = std::move(item.reject);
    } else {
      auto owned = std::make_unique<QueuedItem>(
          QueuedItem{std::move(item), handle, now, TtlInForceLocked()});
      QueuedItem* queued = owned.get();
      FlowState& flow = flows_.try_emplace(queued->request.flow_id).first->second;
      flow.limits = queued->request.limits;
      flow.weight = queued->request.weight;
      ++flow.queued;
      BandLocked(queued->request.priority).Add(queued);
      by_age_.insert(queued);
      queued_bytes_ += queued->request.bytes;
      queued_items_.emplace(handle, std::move(owned));
    }
  }
  if (refused.has_value()) {
    reject(*refused);
    return handle;
  }
  if (Pump(now) && options_.on_waiting)
    options_.on_waiting();
  return handle;
}

void FlowController::Cancel(Handle handle) {
  Owned item;
  {
    base::MutexLock lock(&mu_);
    const auto it = queued_items_.find(handle);
    if (it == queued_items_.end())
      return;
    BandLocked(it->second->request.priority).Remove(it->second.get());
    item = ForgetLocked(it->second.get());
    ++rejected_total_[static_cast<size_t>(DropReason::kContextCancelled)];
  }
  item->request.reject(DropReason::kContextCancelled);
}

void FlowController::Finished(std::string_view flow_id, int32_t priority, Clock::time_point now) {
  {
    base::MutexLock lock(&mu_);
    // The band counts per (flow, priority); a Finished it cannot match changes nothing.
    const auto band = bands_.find(priority);
    if (band != bands_.end() && band->second->Finished(flow_id)) {
      const auto flow = flows_.find(flow_id);
      --flow->second.in_flight;
      EraseFlowIfIdleLocked(flow);
    }
  }
  Pump(now);
}

bool FlowController::Pump(Clock::time_point now) {
  std::vector<Owned> expired;
  {
    base::MutexLock lock(&mu_);
    if (pumping_)
      return true;
    pumping_ = true;
    ObserveRegimeLocked(now);
    ExpireLocked(now, &expired);
  }
  Reject(expired, DropReason::kTtlExpired);
  for (int i = 0; i < options_.max_dispatches_per_pump; ++i) {
    Owned item;
    {
      base::MutexLock lock(&mu_);
      item = TakeNextLocked(now);
      if (item == nullptr) {
        pumping_ = false;
        return !queued_items_.empty();
      }
    }
    Dispatch(*item, now);
  }
  base::MutexLock lock(&mu_);
  pumping_ = false;
  return !queued_items_.empty();
}

void FlowController::Shutdown() {
  std::vector<Owned> items;
  {
    base::MutexLock lock(&mu_);
    shutting_down_ = true;
    items = TakeAllLocked();
    rejected_total_[static_cast<size_t>(DropReason::kShuttingDown)] += items.size();
  }
  Reject(items, DropReason::kShuttingDown);
}

FlowControlSnapshot FlowController::Snapshot(Clock::time_point now) const {
  FlowControlSnapshot snapshot;
  base::MutexLock lock(&mu_);
  for (const auto& [priority, band] : bands_) {
    snapshot.bands.push_back({priority, band->queued(), band->queued_bytes(), band->in_flight(),
                              band->config().max_requests, band->config().max_bytes,
                              std::string(band->fairness_type()),
                              std::string(band->ordering_type())});
    for (const auto& [flow_id, flow] : band->flows()) {
      double oldest_wait_s = 0;
      for (const QueuedItem* item : flow.items) {
        oldest_wait_s =
            std::max(oldest_wait_s, std::chrono::duration<double>(now - item->enqueued).count());
      }
      snapshot.flows.push_back({flow_id, priority, static_cast<int64_t>(flow.items.size()),
                                flow.bytes, flow.in_flight, oldest_wait_s});
    }
  }
  snapshot.queued = static_cast<int64_t>(queued_items_.size());
  snapshot.queued_bytes = queued_bytes_;
  snapshot.dispatched_total = dispatched_total_;
  snapshot.rejected_total = rejected_total_;
  return snapshot;
}

void FlowController::ObserveRegimeLocked(Clock::time_point now) {
  const bool has_endpoints = gate_->HasEndpoints();
  if (has_endpoints != has_endpoints_) {
    has_endpoints_ = has_endpoints;
    regime_since_ = now;
  }
}

Clock::duration FlowController::TtlInForceLocked() const {
  return has_endpoints_ ? config_.default_request_ttl : config_.no_endpoint_request_ttl;
}

PriorityBand& FlowController::BandLocked(int32_t priority) {
  auto band = bands_.find(priority);
  if (band == bands_.end())
    band =
        bands_.emplace(priority, std::make_unique<PriorityBand>(config_.BandFor(priority))).first;
  return *band->second;
}

bool FlowController::FitsLocked(const FlowItem& item) {
  if (config_.max_requests > 0 &&
      static_cast<int64_t>(queued_items_.size()) + 1 > config_.max_requests) {
    return false;
  }
  if (config_.max_bytes > 0 && queued_bytes_ + item.bytes > config_.max_bytes)
    return false;
  if (!BandLocked(item.priority).Fits(item.bytes))
    return false;
  const auto flow = flows_.find(item.flow_id);
  const int64_t flow_queued = flow == flows_.end() ? 0 : flow->second.queued;
  return item.limits.max_queued <= 0 || flow_queued + 1 <= item.limits.max_queued;
}

FlowController::Owned FlowController::ForgetLocked(QueuedItem* item) {
  by_age_.erase(item);
  queued_bytes_ -= item->request.bytes;
  const auto flow = flows_.find(item->request.flow_id);
  --flow->second.queued;
  EraseFlowIfIdleLocked(flow);
  auto node = queued_items_.extract(item->seq);
  return std::move(node.mapped());
}

void FlowController::ExpireLocked(Clock::time_point now, std::vector<Owned>* expired) {
  const Clock::duration zero{0};
  const Clock::duration ttl = TtlInForceLocked();
  // The bound on any wait, across regime changes: the longer budget, when both are set.
  const Clock::duration longest =
      config_.default_request_ttl > zero && config_.no_endpoint_request_ttl > zero
          ? std::max(config_.default_request_ttl, config_.no_endpoint_request_ttl)
          : zero;
  // Both tests only pass sooner for an item enqueued earlier: stop at the first survivor.
  while (!by_age_.empty()) {
    QueuedItem* oldest = *by_age_.begin();
    const Clock::time_point budget_start = std::max(oldest->enqueued, regime_since_);
    const bool out_of_budget = ttl > zero && now - budget_start >= ttl;
    const bool out_of_bound = longest > zero && now - oldest->enqueued >= longest;
    if (!out_of_budget && !out_of_bound)
      break;
    BandLocked(oldest->request.priority).Remove(oldest);
    expired->push_back(ForgetLocked(oldest));
  }
  rejected_total_[static_cast<size_t>(DropReason::kTtlExpired)] += expired->size();
}

FlowController::Owned FlowController::TakeNextLocked(Clock::time_point now) {
  for (auto& [priority, band] : bands_) {
    if (band->queued() == 0)
      continue;
    candidates_.clear();
    for (const auto& [flow_id, queue] : band->flows()) {
      const FlowState& flow = flows_.find(flow_id)->second;
      if (queue.items.empty() ||
          (flow.limits.max_concurrent > 0 && flow.in_flight >= flow.limits.max_concurrent)) {
        continue;
      }
      candidates_.push_back({flow_id, *queue.items.begin(), flow.weight});
    }
    // A band whose flows are all at their concurrency limits holds nothing back: the limit is
    // theirs, not the pool's.
    if (candidates_.empty())
      continue;
    if (!gate_->MayDispatch(priority, now))
      return nullptr;
    QueuedItem* item = band->TakeNext(candidates_, now);
    // In flight before ForgetLocked, so that the flow's state stays.
    ++flows_.find(item->request.flow_id)->second.in_flight;
    ++dispatched_total_;
    return ForgetLocked(item);
  }
  return nullptr;
}

void FlowController::EraseFlowIfIdleLocked(
    std::map<std::string, FlowState, std::less<>>::iterator flow) {
  if (flow->second.queued == 0 && flow->second.in_flight == 0)
    flows_.erase(flow);
}

std::vector<FlowController::Owned> FlowController::TakeAllLocked() {
  std::vector<Owned> items;
  items.reserve(queued_items_.size());
  for (auto& [handle, item] : queued_items_)
    items.push_back(std::move(item));
  std::sort(items.begin(), items.end(),
            [](const Owned& a, const Owned& b) { return a->seq < b->seq; });
  queued_items_.clear();
  by_age_.clear();
  for (auto& [priority, band] : bands_)
    band->Clear();
  for (auto flow = flows_.begin(); flow != flows_.end();) {
    const auto next = std::next(flow);
    flow->second.queued = 0;
    EraseFlowIfIdleLocked(flow);
    flow = next;
  }
  queued_bytes_ = 0;
  return items;
}

void FlowController::Reject(std::vector<Owned>& items, DropReason reason) {
  for (const Owned& item : items)
    item->request.reject(reason);
}

void FlowController::Dispatch(QueuedItem& item, Clock::time_point now) const {
  const double queue_s = std::max(0.0, std::chrono::duration<double>(now - item.enqueued).count());
  item.request.dispatch();
  if (options_.on_dispatched)
    options_.on_dispatched(item.request.flow_id, item.request.priority, queue_s);
}

}  // namespace switchyard::router::flow
