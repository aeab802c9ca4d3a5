// DrainGate: admission of generation requests, and the count of those still being answered,
// for the graceful shutdown (vLLM's --shutdown-timeout, Envoy's drain). While serving, each
// accepted generation request holds a Ticket until its answer is fully handed to the socket
// (or its connection closed). Once the drain began, Admit refuses (the route answers 503
// with Retry-After and /health reports not ready), and the controlling thread waits for the
// tickets to run out, up to its deadline.
//
// Threads: any thread may call any method. Owned by the EngineServer; it must outlive every
// ticket (EngineServer::Stop waits for them, with a bound, before the HTTP front goes).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "base/mutex.h"

namespace switchyard::engine {

class DrainGate {
 public:
  // Held while a request is being answered; dropping the last copy releases it.
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
  // drain; the final wait for the last answers to be written is not cut by it).
  void Interrupt();

 private:
  void Release();

  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace switchyard::engine
