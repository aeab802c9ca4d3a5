// Drain: the router's graceful shutdown state, as Envoy drains a listener. It counts the
// proxied requests in flight (each holds a Ticket for its whole life), says whether the
// router is draining (/health then answers 503 and new requests are refused with 503 and
// Retry-After), waits for the requests in flight to end, and ends the ones left at the
// deadline with a clean error (ProxyCall::Abort).
//
// Thread-safe: one mutex; tickets end on any thread.
#pragma once

#include <chrono>
#include <list>
#include <memory>

#include "base/mutex.h"
#include "router/internal/proxy_call.h"

namespace switchyard::router::internal {

class Drain {
 public:
  // A request in flight, from before its ProxyCall exists until the call is destroyed.
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // The call to abort should the drain run out of time.
    void Attach(const std::shared_ptr<ProxyCall>& call);

   private:
    friend class Drain;
    using Calls = std::list<std::weak_ptr<ProxyCall>>;
    Ticket(Drain* drain, Calls::iterator it) : drain_(drain), it_(it) {}
    Drain* const drain_;
    const Calls::iterator it_;
  };

  // A ticket for a new request. REQUIRES: the Drain outlives it.
  std::unique_ptr<Ticket> Admit();

  // From now on draining() is true. Idempotent.
  void Start();
  bool draining() const;
  // Blocks until no request is in flight (true), or `deadline` passes or Interrupt is
  // called (false).
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // Ends a WaitIdle now (a second signal).
  void Interrupt();
  // Ends every request still in flight with a clean error (ProxyCall::Abort).
  void AbortAll();

 private:
  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  Ticket::Calls calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router::internal
