#include "router/internal/drain.h"

#include <vector>

#include "absl/status/status.h"

namespace switchyard::router::internal {

Drain::Ticket::~Ticket() {
  base::MutexLock lock(&drain_->mu_);
  drain_->calls_.erase(it_);
  if (drain_->calls_.empty())
    drain_->cv_.NotifyAll();
}

void Drain::Ticket::Attach(const std::shared_ptr<ProxyCall>& call) {
  base::MutexLock lock(&drain_->mu_);
  *it_ = call;
}

std::unique_ptr<Drain::Ticket> Drain::Admit() {
  base::MutexLock lock(&mu_);
  calls_.emplace_back();
  return std::unique_ptr<Ticket>(new Ticket(this, std::prev(calls_.end())));
}

void Drain::Start() {
  base::MutexLock lock(&mu_);
  draining_ = true;
}

bool Drain::draining() const {
  base::MutexLock lock(&mu_);
  return draining_;
}

bool Drain::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  base::MutexLock lock(&mu_);
  cv_.WaitUntil(&mu_, deadline, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return calls_.empty() || interrupted_;
  });
  return calls_.empty();
}

void Drain::Interrupt() {
  base::MutexLock lock(&mu_);
  interrupted_ = true;
  cv_.NotifyAll();
}

void Drain::AbortAll() {
  std::vector<std::shared_ptr<ProxyCall>> calls;
  {
    base::MutexLock lock(&mu_);
    for (const std::weak_ptr<ProxyCall>& weak : calls_) {
      if (std::shared_ptr<ProxyCall> call = weak.lock())
        calls.push_back(std::move(call));
    }
  }
  // Outside the lock: an aborted call may end, and its ticket with it, at once.
  for (const std::shared_ptr<ProxyCall>& call : calls)
    call->Abort(absl::UnavailableError("The router is shutting down; retry the request."));
}

}  // namespace switchyard::router::internal
