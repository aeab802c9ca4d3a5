// DrainGate: admission of units of work (requests), and the count of those still in flight,
// for a graceful shutdown (vLLM's --shutdown-timeout, Envoy's drain). While serving, Admit
// hands each accepted unit a Ticket, held until the unit is done (its answer handed to the
// socket, its proxied call gone). Once BeginDrain was called, Admit refuses (the server
// answers 503 with Retry-After and /health reports not ready), and the controlling thread
// waits for the tickets to run out, up to its deadline, or until Interrupt (a second signal).
//
// Threads: any thread may call any method; tickets may be dropped on any thread.
// Ownership: owned by the server that admits; it must outlive every ticket (the server's
// shutdown waits for them, with a bound, before the parts they use go).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "base/mutex.h"

namespace switchyard::base {

class DrainGate {
 public:
  // Held while a unit of work is in flight; dropping the last copy releases it.
  using Ticket = std::shared_ptr<void>;
  using Clock = std::chrono::steady_clock;

  DrainGate() = default;
  DrainGate(const DrainGate&) = delete;
  DrainGate& operator=(const DrainGate&) = delete;

  // A ticket, or nullptr once the drain began.
  Ticket Admit();
  // Refuses new work from now on. Idempotent.
  void BeginDrain();
  bool draining() const;
  int64_t num_in_flight() const;

  // Waits until no ticket is held (returns true) or `deadline`; with `interruptible`, also
  // until Interrupt was called.
  bool AwaitIdle(Clock::time_point deadline, bool interruptible);
  // Ends every interruptible AwaitIdle at once, now and later (a second signal ends the
  // drain; a final wait for the last answers to be written is not cut by it).
  void Interrupt();

 private:
  void Release();

  mutable Mutex mu_;
  CondVar cv_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace switchyard::base
