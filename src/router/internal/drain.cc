#include "router/internal/drain.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace switchyard::router::internal {

Drain::Ticket::~Ticket() {
  base::MutexLock lock(&drain_->mu_);
  drain_->calls_.erase(it_);
}

void Drain::Ticket::Attach(const std::shared_ptr<ProxyCall>& call) {
  base::MutexLock lock(&drain_->mu_);
  *it_ = call;
}

std::unique_ptr<Drain::Ticket> Drain::Admit() {
  base::DrainGate::Ticket admitted = gate_.Admit();
  if (admitted == nullptr)
    return nullptr;
  base::MutexLock lock(&mu_);
  calls_.emplace_back();
  return std::unique_ptr<Ticket>(new Ticket(this, std::prev(calls_.end()), std::move(admitted)));
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
