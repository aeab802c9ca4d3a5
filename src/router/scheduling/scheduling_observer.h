// SchedulingObserver: what the scheduling plugins learn that other router replicas should
// learn too: a prefix the approximate index now places on an endpoint (a pick), and an
// endpoint a session is now bound to (session_id strategy). The shared-state sync
// (router/shared/replica_sync.h) implements it; without one nothing is reported.
//
// ObserverSlot is how plugins reach it: the PluginSet owns one and hands it to the plugins it
// builds, before any observer exists; the router installs its observer later. Reading the
// slot is one atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace switchyard::router {

// Implementations are thread-safe and fast (they run on the request path).
class SchedulingObserver {
 public:
  virtual ~SchedulingObserver() = default;
  virtual void PrefixLearned(const std::string& endpoint, std::span<const uint64_t> keys) = 0;
  virtual void SessionBound(std::string_view session_id, const std::string& endpoint) = 0;
};

class ObserverSlot {
 public:
  // `observer` outlives its installation (install null before it goes).
  void Install(SchedulingObserver* observer) { observer_.store(observer); }
  SchedulingObserver* get() const { return observer_.load(std::memory_order_acquire); }

 private:
  std::atomic<SchedulingObserver*> observer_{nullptr};
};

}  // namespace switchyard::router
