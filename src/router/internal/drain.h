// Drain: the router's graceful shutdown state, as Envoy drains a listener. The base::DrainGate
// does the admission (refused once the drain began: /health then answers 503 and new
// requests 503 with Retry-After), counts the proxied requests in flight and waits for them;
// what is the router's own is the list of their ProxyCalls, so that the ones left at the
// deadline end with a clean error (AbortAll).
//
// Threads: any thread may call any method; tickets end on any thread.
// Ownership: owned by the RouterServer; it must outlive every ticket.
#pragma once

#include <list>
#include <memory>

#include "base/drain_gate.h"
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
    Ticket(Drain* drain, Calls::iterator it, base::DrainGate::Ticket admitted)
        : drain_(drain), it_(it), admitted_(std::move(admitted)) {}
    Drain* const drain_;
    const Calls::iterator it_;
    // Released after the call left the list (members go after the destructor's body).
    const base::DrainGate::Ticket admitted_;
  };

  // A ticket for a new request, or nullptr once the drain began.
  std::unique_ptr<Ticket> Admit();
  // Begin the drain, check it, wait for the requests in flight, interrupt that wait.
  base::DrainGate& gate() { return gate_; }
  // Ends every request still in flight with a clean error (ProxyCall::Abort).
  void AbortAll();

 private:
  base::DrainGate gate_;
  base::Mutex mu_;
  Ticket::Calls calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router::internal
