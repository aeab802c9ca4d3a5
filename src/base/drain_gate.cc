#include "base/drain_gate.h"

namespace switchyard::base {

DrainGate::Ticket DrainGate::Admit() {
  {
    MutexLock lock(&mu_);
    if (draining_)
      return nullptr;
    ++in_flight_;
  }
  // The deleter runs when the last copy goes, whoever holds it.
  return Ticket(static_cast<void*>(this),
                [](void* gate) { static_cast<DrainGate*>(gate)->Release(); });
}

void DrainGate::Release() {
  bool idle = false;
  {
    MutexLock lock(&mu_);
    idle = --in_flight_ == 0;
  }
  if (idle)
    cv_.NotifyAll();
}

void DrainGate::BeginDrain() {
  MutexLock lock(&mu_);
  draining_ = true;
}

bool DrainGate::draining() const {
  MutexLock lock(&mu_);
  return draining_;
}

int64_t DrainGate::num_in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

bool DrainGate::AwaitIdle(Clock::time_point deadline, bool interruptible) {
  MutexLock lock(&mu_);
  cv_.WaitUntil(&mu_, deadline, [this, interruptible]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ == 0 || (interruptible && interrupted_);
  });
  return in_flight_ == 0;
}

void DrainGate::Interrupt() {
  {
    MutexLock lock(&mu_);
    interrupted_ = true;
  }
  cv_.NotifyAll();
}

}  // namespace switchyard::base
